package weft_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

func TestOrderCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		o    weft.Order
		want string // "" for valid
	}{
		{weft.Order{}, ""},
		{weft.Order{Priority: 1, FairnessKey: "acme", FairnessWeight: 1000}, ""},
		{weft.Order{Priority: 5, FairnessKey: strings.Repeat("k", weft.MaxFairnessKey)}, ""},
		{weft.Order{Priority: 6}, "priority 6 is not from 1 (first) to 5 (last)"},
		{weft.Order{Priority: -1}, "priority -1"},
		{weft.Order{FairnessKey: strings.Repeat("k", weft.MaxFairnessKey+1)}, "fairness key of 257 bytes is longer than 256"},
		{weft.Order{FairnessWeight: 1001}, "fairness weight 1001 is not from 1 to 1000"},
		{weft.Order{FairnessWeight: -2}, "fairness weight -2"},
	} {
		err := tt.o.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%+v) = %v, want nil", tt.o, err)
		case tt.want != "" && (!errors.Is(err, weft.ErrInvalid) || !strings.Contains(message(err), tt.want)):
			t.Errorf("Check(%+v) = %v, want weft.ErrInvalid saying %q", tt.o, err, tt.want)
		}
	}
}

// message is err's message, "" for nil.
func message(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
