package definition

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxDays keeps days × 24h within time.Duration.
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// ParseDuration parses a duration as time.ParseDuration does ("500ms",
// "30s", "1h30m"), and also accepts a leading whole number of days: "7d",
// "1d12h". A day is always 24 hours.
func ParseDuration(s string) (time.Duration, error) {
	invalid := func() error {
		return fmt.Errorf("invalid duration %q: want a number and a unit, e.g. 500ms, 30s, 72h or 7d", s)
	}
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || days < 0 || days > maxDays {
			return 0, invalid()
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 || d+r < d {
				return 0, invalid()
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid()
	}
	return d, nil
}
