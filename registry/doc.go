// Package registry registers the payload contracts (package contract) with
// a Confluent-compatible schema registry (Confluent's, Apicurio's
// /apis/ccompat/v7, Karapace) and frames record values in the registry's
// wire format: a zero byte, the schema id as 4 bytes big-endian, then the
// payload unchanged. sink asks it, through a one-method seam, for the value
// of each event whose type has a contract; a contract is registered on its
// first use under its subject, <topic>-<event type>, once per process.
package registry
