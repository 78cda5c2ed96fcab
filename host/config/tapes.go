package config

import (
	"strings"

	"github.com/weftworks/weft/host/weft"
)

// tapesConfig configures recorded attempts (docs/workflows.md, "Recorded
// attempts"): which activity attempts keep the tape of the host's
// answers, and how large one may grow.
type tapesConfig struct {
	// Policy is the host's record policy, for the workflows and steps
	// whose definition has no record: off, failed, all or a percentage
	// such as 5% (weft.ParseRecordPolicy). Defaults to failed.
	Policy string `koanf:"policy"`
	// MaxBytes caps one attempt's tape; past it the recording stops and
	// the tape is marked truncated. From 1KiB to 64MiB (weft.MaxTapeBytes):
	// 0 is refused rather than read as unlimited, since a tape without a
	// cap could fill the store (off is the way to record nothing).
	// Defaults to 1MiB (weft.DefaultTapeBytes).
	MaxBytes byteSize `koanf:"max_bytes"`
}

// minTapeBytes is the least tapes.max_bytes: a tape smaller than this
// would hold little more than the call's information.
const minTapeBytes = 1 << 10

// TapePolicy is the host's record policy (tapes.policy), for the engine:
// what a step and its workflow fall back on (weft.RecordPolicy.Or).
func (c *Loaded) TapePolicy() weft.RecordPolicy {
	p, err := weft.ParseRecordPolicy(c.Tapes.Policy)
	if err != nil {
		return weft.DefaultRecordPolicy // refused by validate: not reached from Load
	}
	return p
}

// tapePolicyAsSet is tapes.policy for the engine's configuration: the
// policy it parses to, or, when it does not parse, its text as a mode,
// for the engine to refuse as it is (the host's own rule, tapes, has
// named the key already).
func (c *Loaded) tapePolicyAsSet() weft.RecordPolicy {
	p, err := weft.ParseRecordPolicy(c.Tapes.Policy)
	if err != nil {
		return weft.RecordPolicy{Mode: weft.RecordMode(c.Tapes.Policy)}
	}
	return p
}

// TapeMaxBytes is the cap on one attempt's tape (tapes.max_bytes).
func (c *Loaded) TapeMaxBytes() int { return int(c.Tapes.MaxBytes) }

// tapes checks the tapes keys with the host's words (a size in KiB, the
// forms of a policy); the engine judges them too (engine.TapeConfig),
// and its words give way to these.
func (v *checker) tapes() {
	c := v.c
	if _, err := weft.ParseRecordPolicy(c.Tapes.Policy); err != nil {
		v.bad("tapes.policy", "%s", strings.TrimPrefix(err.Error(), weft.ErrInvalid.Error()+": "))
	}
	if n := c.Tapes.MaxBytes; n < minTapeBytes || n > weft.MaxTapeBytes {
		v.bad("tapes.max_bytes", "want 1KiB to %s, got %s (tapes.policy off records nothing)", byteSize(weft.MaxTapeBytes), n)
	}
}
