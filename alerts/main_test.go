package alerts_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a sender, evaluation loop or leader session running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
