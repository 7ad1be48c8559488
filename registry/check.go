package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// Check reports, changing nothing, whether the registry answers and
// whether each contract of eventTypes would register: one item for the
// registry, then one per contract. Its subjects are those of topics (the
// fixed topics events are routed to), and, since a topic template's
// topics are known only once events come, every existing subject named
// <something>-<event type>. A subject that exists is asked whether the
// contract is compatible with its latest version; one that does not yet is
// registered on first use, as the registry's rules allow.
func (r *Registry) Check(ctx context.Context, eventTypes, topics []string) []checklist.Item {
	existing, err := r.c.subjects(ctx)
	if err != nil {
		fix := "start the registry, or correct --schema-registry (the base of the Confluent-compatible API: Apicurio's ends in /apis/ccompat/v7)"
		var e *Error
		if errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) {
			fix = "correct --schema-registry-user and --schema-registry-password, or grant that user read and write on subjects"
		}
		return []checklist.Item{{Name: "schema registry", Status: checklist.Fail, Detail: checklist.OneLine(err), Fix: fix}}
	}
	items := []checklist.Item{{Name: "schema registry", Status: checklist.OK,
		Detail: fmt.Sprintf("%s answers (%d subjects); each contract is registered on first use as <topic>-<event type>, and values of event types with one are framed (0x00, 4-byte schema id)", r.c.base, len(existing))}}
	for _, t := range eventTypes {
		items = append(items, r.checkContract(ctx, t, topics, existing))
	}
	return items
}

// checkContract is eventType's item.
func (r *Registry) checkContract(ctx context.Context, eventType string, topics, existing []string) checklist.Item {
	name := "schema registry: " + eventType
	doc, ok := r.docs.Document(eventType)
	if !ok {
		return checklist.Item{Name: name, Status: checklist.Fail, Detail: "no contract"}
	}
	var subjects []string
	for _, s := range existing {
		if strings.HasSuffix(s, "-"+eventType) {
			subjects = append(subjects, s)
		}
	}
	var fresh []string
	for _, t := range topics {
		if s := Subject(t, eventType); !slices.Contains(subjects, s) {
			fresh = append(fresh, s)
		}
	}
	var refused []string
	for _, s := range subjects {
		ok, err := r.c.compatible(ctx, s, doc)
		switch {
		case err != nil:
			return checklist.Item{Name: name, Status: checklist.Fail, Detail: fmt.Sprintf("compatibility of %s: %s", s, checklist.OneLine(err))}
		case !ok:
			refused = append(refused, s)
		}
	}
	if len(refused) > 0 {
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("incompatible with the latest version of %s under the registry's compatibility rule: its events there would be dead-lettered (schema_registry_refused)", strings.Join(refused, ", ")),
			Fix:    "make the contract compatible (add optional properties, do not remove or retype any), or change the subject's compatibility rule"}
	}
	detail := "no subject yet: registered on first use"
	if len(subjects) > 0 {
		detail = "compatible with " + strings.Join(subjects, ", ")
	}
	if len(fresh) > 0 {
		detail += "; new: " + strings.Join(fresh, ", ")
	}
	return checklist.Item{Name: name, Status: checklist.OK, Detail: detail}
}
