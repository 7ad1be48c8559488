package relay

import (
	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// validate checks the settings alone; the files are read by Load.
func (c Contracts) validate() error {
	switch {
	case c.Unknown != contract.UnknownAllow && c.Unknown != contract.UnknownDeadLetter:
		return bad("Unknown", "{Unknown} %q: want allow or dead-letter", c.Unknown)
	case c.Unknown == contract.UnknownDeadLetter && c.Dir == "":
		return bad("Unknown", "{Unknown=dead-letter} needs {Dir}: without contracts every event type is unknown")
	}
	return nil
}

// contracts reads and compiles the contracts of Dir, once (New calls it):
// what sink checks payloads with. nil, and no check, without a Dir; a file
// that cannot be used is a *ConfigError naming it (`outbox-cdc check`
// lists each, through contract.LoadError).
func (c Contracts) contracts() (sink.Contracts, error) {
	if c.Dir == "" {
		return nil, nil // a nil interface, not a nil *contract.Set in one
	}
	set, err := contract.Load(c.Dir, c.Unknown)
	if err != nil {
		return nil, bad("Dir", "{Dir} %s: %w", c.Dir, err)
	}
	return set, nil
}
