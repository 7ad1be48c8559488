package predicate

import (
	"maps"
	"slices"
	"strings"
)

// The allow-lists of ParseRestricted: the built-ins a predicate over the
// outbox row's own values needs, and nothing that reads the database, the
// server's settings or files (table_to_xml, current_setting, pg_read_file),
// changes anything (set_config, lo_import), or reaches another server
// (dblink). A list and not a deny-list: PostgreSQL's catalogue grows with
// every release and extension, and what is not named here is refused.
// Every name resolves in pg_catalog alone: the backfill pins search_path,
// so no function or operator of the same name elsewhere can stand in.

// allowedFuncs are the functions a predicate may call, by name. All are
// immutable, except now(), age(x) (which reads current_date), date(x),
// to_timestamp(text, text), and date_trunc, date_part and casts over
// timestamptz, which are stable: they read the transaction's start time and
// the session's settings (TimeZone, DateStyle, lc_time), and nothing else.
var allowedFuncs = setOf(
	// text
	"lower", "upper", "length", "char_length", "character_length", "octet_length",
	"substr", "strpos", "starts_with", "left", "right", "replace", "btrim", "ltrim", "rtrim",
	// numbers
	"abs", "round", "floor", "ceil", "ceiling", "trunc", "mod", "sign",
	// time
	"now", "date_trunc", "date_part", "to_timestamp", "age", "date",
	// jsonb (and json)
	"jsonb_typeof", "jsonb_array_length", "json_typeof", "json_array_length",
	// conditional expressions
	"coalesce", "nullif", "greatest", "least",
)

// specialForms are SQL's function-like expressions with a grammar of their
// own, which restrictedParser reads one by one.
var specialForms = setOf("cast", "extract", "position", "substring", "trim")

// timeValues are SQL's value functions written without parentheses (a
// precision may follow). now() is allowed, and these are now() in other
// forms: fixed for the backfill's transaction. clock_timestamp() and
// statement_timestamp() are not: they change while the backfill reads, so
// that its count and its rows would disagree.
var timeValues = setOf("current_date", "current_time", "current_timestamp", "localtime", "localtimestamp")

// allowedOps are the operators a predicate may use: comparison,
// arithmetic, text concatenation, regular-expression matches (immutable:
// the pattern is the operand's, nothing else is read) and jsonb access and
// containment.
var (
	comparisonOps = setOf("=", "<>", "!=", "<", ">", "<=", ">=")
	additiveOps   = setOf("+", "-")
	multiplyOps   = setOf("*", "/", "%")
	regexOps      = setOf("~", "~*", "!~", "!~*")
	otherOps      = union(regexOps, setOf("||", "->", "->>", "#>", "#>>", "?", "?|", "?&", "@>", "<@"))
)

// allowedTypes are the types a predicate may cast to (::type, CAST, or a
// typed constant such as interval '7 days'), and arrays of them (::text[]):
// plain values, never a catalogue type (regclass, regproc, oid, …), whose
// input functions look names up and read the catalogue.
var allowedTypes = setOf("text", "varchar", "character varying", "char", "character",
	"int", "integer", "int2", "int4", "int8", "smallint", "bigint",
	"numeric", "decimal", "real", "float4", "float8", "double precision",
	"boolean", "bool", "date", "timestamp", "timestamptz", "time", "timetz",
	"interval", "uuid", "json", "jsonb")

// typeModifiers are the allowed types that take a modifier, (n), (p) or
// (p,s).
var typeModifiers = setOf("varchar", "character varying", "char", "character", "numeric", "decimal",
	"timestamp", "timestamptz", "time", "timetz")

// keywords are PostgreSQL's reserved keywords and those that begin an
// expression of their own (its documentation's "reserved", "reserved (can
// be function or type)" and "non-reserved (cannot be function or type)"):
// written bare, such a word is not read as a column (current_user is the
// role's name, ARRAY[…] an array), so the grammar refuses it as one. A
// column of that name is written quoted ("user").
var keywords = setOf(
	"all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "both", "case", "cast",
	"check", "collate", "column", "constraint", "create", "current_catalog", "current_date", "current_role",
	"current_time", "current_timestamp", "current_user", "default", "deferrable", "desc", "distinct", "do",
	"else", "end", "except", "false", "fetch", "for", "foreign", "from", "grant", "group", "having", "in",
	"initially", "intersect", "into", "lateral", "leading", "limit", "localtime", "localtimestamp", "not",
	"null", "offset", "on", "only", "or", "order", "placing", "primary", "references", "returning", "select",
	"session_user", "some", "symmetric", "system_user", "table", "then", "to", "trailing", "true", "union",
	"unique", "user", "using", "variadic", "when", "where", "window", "with",
	"authorization", "binary", "collation", "concurrently", "cross", "current_schema", "freeze", "full",
	"ilike", "inner", "is", "isnull", "join", "left", "like", "natural", "notnull", "outer", "overlaps",
	"right", "similar", "tablesample", "verbose",
	"between", "bigint", "bit", "boolean", "char", "character", "coalesce", "dec", "decimal", "exists",
	"extract", "float", "greatest", "grouping", "inout", "int", "integer", "interval", "json", "json_array",
	"json_arrayagg", "json_exists", "json_object", "json_objectagg", "json_query", "json_scalar",
	"json_serialize", "json_table", "json_value", "least", "merge_action", "national", "nchar", "none",
	"normalize", "nullif", "numeric", "out", "overlay", "position", "precision", "real", "row", "setof",
	"smallint", "substring", "time", "timestamp", "treat", "trim", "values", "varchar", "xmlattributes",
	"xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlnamespaces", "xmlparse", "xmlpi", "xmlroot",
	"xmlserialize", "xmltable",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func union(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		maps.Copy(m, s)
	}
	return m
}

// listed renders the allow-lists for an error message.
func listed(sets ...map[string]bool) string {
	var all []string
	for _, s := range sets {
		all = slices.AppendSeq(all, maps.Keys(s))
	}
	slices.Sort(all)
	return strings.Join(all, ", ")
}

func allowedOp(op string) bool {
	return comparisonOps[op] || additiveOps[op] || multiplyOps[op] || otherOps[op]
}
