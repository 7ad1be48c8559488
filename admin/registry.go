package admin

import (
	"context"
	"slices"

	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/registry"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// checkRegistry is check's items for --schema-registry: whether it
// answers, and whether each contract would register under the subjects
// of the fixed topics and the subjects that exist already (registry.Check).
// Nothing without a registry, or when the contracts do not load (their
// own items say why).
func checkRegistry(ctx context.Context, cfg relay.Config) []checklist.Item {
	c := cfg.Contracts
	if c.Registry.URL == "" || c.Dir == "" {
		return nil
	}
	set, err := contract.Load(c.Dir, c.Unknown)
	if err != nil {
		return nil
	}
	reg, err := registry.New(c.Registry.RegistryConfig(set, nil))
	if err != nil {
		return []checklist.Item{{Name: "schema registry", Status: checklist.Fail, Detail: checklist.OneLine(err)}}
	}
	return reg.Check(ctx, set.EventTypes(), fixedTopics(cfg))
}

// fixedTopics are the topics of routes whose template names one topic.
func fixedTopics(cfg relay.Config) []string {
	routes := []relay.Route{}
	for _, t := range cfg.Tables {
		routes = append(routes, t.Route)
	}
	if cfg.Messages.Prefix != "" {
		routes = append(routes, cfg.Defaults.Route)
	}
	var out []string
	for _, r := range routes {
		topic, err := sink.ParseTopic(r.Topic)
		if err == nil {
			topic, err = topic.Rewrite(r.Regex, r.Replacement)
		}
		if name, ok := topic.Fixed(); err == nil && ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
