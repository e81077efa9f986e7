package grafana

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// TestShortSpanWithinHourlyKeep ties the panels' SQL, a constant, to how long rollup_hourly keeps
// every hour: a panel must not read hours the writer prunes.
func TestShortSpanWithinHourlyKeep(t *testing.T) {
	t.Parallel()
	if want := fmt.Sprintf("now() - interval '%d days'", rollup.HourlyKeep/(24*time.Hour)); !strings.Contains(shortSpan, want) {
		t.Errorf("shortSpan does not bound the range by rollup.HourlyKeep (%q):\n%s", want, shortSpan)
	}
}
