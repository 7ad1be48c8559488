package kwire

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/addoffsetstotxn"
	"github.com/segmentio/kafka-go/protocol/addpartitionstotxn"
	"github.com/segmentio/kafka-go/protocol/alterclientquotas"
	"github.com/segmentio/kafka-go/protocol/alterconfigs"
	"github.com/segmentio/kafka-go/protocol/alterpartitionreassignments"
	"github.com/segmentio/kafka-go/protocol/alteruserscramcredentials"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/createacls"
	"github.com/segmentio/kafka-go/protocol/createpartitions"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	"github.com/segmentio/kafka-go/protocol/deleteacls"
	"github.com/segmentio/kafka-go/protocol/deletegroups"
	"github.com/segmentio/kafka-go/protocol/deletetopics"
	"github.com/segmentio/kafka-go/protocol/describeacls"
	"github.com/segmentio/kafka-go/protocol/describeclientquotas"
	"github.com/segmentio/kafka-go/protocol/describeconfigs"
	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/segmentio/kafka-go/protocol/describeuserscramcredentials"
	"github.com/segmentio/kafka-go/protocol/electleaders"
	"github.com/segmentio/kafka-go/protocol/endtxn"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/segmentio/kafka-go/protocol/findcoordinator"
	"github.com/segmentio/kafka-go/protocol/heartbeat"
	"github.com/segmentio/kafka-go/protocol/incrementalalterconfigs"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/joingroup"
	"github.com/segmentio/kafka-go/protocol/leavegroup"
	"github.com/segmentio/kafka-go/protocol/listgroups"
	"github.com/segmentio/kafka-go/protocol/listoffsets"
	"github.com/segmentio/kafka-go/protocol/listpartitionreassignments"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/offsetcommit"
	"github.com/segmentio/kafka-go/protocol/offsetdelete"
	"github.com/segmentio/kafka-go/protocol/offsetfetch"
	"github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/protocol/syncgroup"
	"github.com/segmentio/kafka-go/protocol/txnoffsetcommit"
)

// api is what the guard knows of one API: the Go types kafka-go encodes
// its requests from and decodes its answers into, the versions it can
// send, and the first flexible version of its answers (-1: none), read
// once from their struct tags rather than at each request and answer.
type api struct {
	req, res       reflect.Type
	lo, hi         int16
	resFlexibleMin int16
}

// apis holds every API kafka-go can speak (each package registers itself
// with kafka-go's protocol when imported): an answer to any other is
// refused.
var apis = func() map[protocol.ApiKey]api {
	pairs := [][2]protocol.Message{
		{&addoffsetstotxn.Request{}, &addoffsetstotxn.Response{}},
		{&addpartitionstotxn.Request{}, &addpartitionstotxn.Response{}},
		{&alterclientquotas.Request{}, &alterclientquotas.Response{}},
		{&alterconfigs.Request{}, &alterconfigs.Response{}},
		{&alterpartitionreassignments.Request{}, &alterpartitionreassignments.Response{}},
		{&alteruserscramcredentials.Request{}, &alteruserscramcredentials.Response{}},
		{&apiversions.Request{}, &apiversions.Response{}},
		{&createacls.Request{}, &createacls.Response{}},
		{&createpartitions.Request{}, &createpartitions.Response{}},
		{&createtopics.Request{}, &createtopics.Response{}},
		{&deleteacls.Request{}, &deleteacls.Response{}},
		{&deletegroups.Request{}, &deletegroups.Response{}},
		{&deletetopics.Request{}, &deletetopics.Response{}},
		{&describeacls.Request{}, &describeacls.Response{}},
		{&describeclientquotas.Request{}, &describeclientquotas.Response{}},
		{&describeconfigs.Request{}, &describeconfigs.Response{}},
		{&describegroups.Request{}, &describegroups.Response{}},
		{&describeuserscramcredentials.Request{}, &describeuserscramcredentials.Response{}},
		{&electleaders.Request{}, &electleaders.Response{}},
		{&endtxn.Request{}, &endtxn.Response{}},
		{&fetch.Request{}, &fetch.Response{}},
		{&findcoordinator.Request{}, &findcoordinator.Response{}},
		{&heartbeat.Request{}, &heartbeat.Response{}},
		{&incrementalalterconfigs.Request{}, &incrementalalterconfigs.Response{}},
		{&initproducerid.Request{}, &initproducerid.Response{}},
		{&joingroup.Request{}, &joingroup.Response{}},
		{&leavegroup.Request{}, &leavegroup.Response{}},
		{&listgroups.Request{}, &listgroups.Response{}},
		{&listoffsets.Request{}, &listoffsets.Response{}},
		{&listpartitionreassignments.Request{}, &listpartitionreassignments.Response{}},
		{&metadata.Request{}, &metadata.Response{}},
		{&offsetcommit.Request{}, &offsetcommit.Response{}},
		{&offsetdelete.Request{}, &offsetdelete.Response{}},
		{&offsetfetch.Request{}, &offsetfetch.Response{}},
		{&produce.Request{}, &produce.Response{}},
		{&saslauthenticate.Request{}, &saslauthenticate.Response{}},
		{&saslhandshake.Request{}, &saslhandshake.Response{}},
		{&syncgroup.Request{}, &syncgroup.Response{}},
		{&txnoffsetcommit.Request{}, &txnoffsetcommit.Response{}},
	}
	m := make(map[protocol.ApiKey]api, len(pairs))
	for _, p := range pairs {
		a := api{req: reflect.TypeOf(p[0]).Elem(), res: reflect.TypeOf(p[1]).Elem()}
		a.lo, a.hi, _ = versions(a.req)
		_, _, a.resFlexibleMin = versions(a.res)
		m[p[0].ApiKey()] = a
	}
	return m
}()

// tag is one alternative of a field's kafka struct tag, as kafka-go's
// forEachStructTag parses it.
type tag struct {
	min, max int16
	tagID    int // -2: a required field; -1 or more: a tagged field
}

// tagsOf parses a kafka struct tag as kafka-go does: alternatives split by
// '|', a missing tag being one alternative that matches no version. The
// tags are kafka-go's own, which it checked when it registered them.
func tagsOf(s string) []tag {
	if s == "-" {
		return nil
	}
	var tags []tag
	for _, alt := range split(s, '|') {
		t := tag{min: -1, max: -1, tagID: -2}
		for _, opt := range split(alt, ',') {
			switch {
			case strings.HasPrefix(opt, "min=v"):
				v, _ := strconv.ParseInt(opt[5:], 10, 16)
				t.min = int16(v)
			case strings.HasPrefix(opt, "max=v"):
				v, _ := strconv.ParseInt(opt[5:], 10, 16)
				t.max = int16(v)
			case opt == "tag":
				t.tagID = -1
			case strings.HasPrefix(opt, "tag="):
				t.tagID, _ = strconv.Atoi(opt[4:])
			}
		}
		tags = append(tags, t)
	}
	return tags
}

// field is a struct field kafka-go encodes or decodes, with its tags.
type field struct {
	typ   reflect.Type
	index int
	tags  []tag
}

// fieldsOf lists t's fields as kafka-go's forEachStructField does: the
// exported ones and those named _.
func fieldsOf(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		if f.PkgPath != "" && f.Name != "_" {
			continue
		}
		s, ok := f.Tag.Lookup("kafka")
		if !ok {
			s = "|"
		}
		fields = append(fields, field{typ: f.Type, index: i, tags: tagsOf(s)})
	}
	return fields
}

// versions returns t's version range and the first flexible version (-1:
// none), as kafka-go's makeTypes computes them.
func versions(t reflect.Type) (lo, hi, flexible int16) {
	lo, hi, flexible = -1, -1, -1
	for _, f := range fieldsOf(t) {
		for _, g := range f.tags {
			if lo < 0 || g.min < lo {
				lo = g.min
			}
			if hi < 0 || g.max > hi {
				hi = g.max
			}
			if g.tagID > -2 && (flexible < 0 || g.min < flexible) {
				flexible = g.min
			}
		}
	}
	return lo, hi, flexible
}

// requestVersions returns the versions of key kafka-go can send.
func requestVersions(key protocol.ApiKey) (lo, hi int16, ok bool) {
	a, ok := apis[key]
	if !ok {
		return 0, 0, false
	}
	return a.lo, a.hi, true
}

// split cuts s at each sep as kafka-go's forEach does: no empty last
// piece after a trailing sep, none at all for an empty s.
func split(s string, sep byte) []string {
	var parts []string
	for len(s) != 0 {
		i := strings.IndexByte(s, sep)
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i])
		s = s[i+1:]
	}
	return parts
}
