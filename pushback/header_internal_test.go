package pushback

import (
	"testing"

	"github.com/exactlyonce/retry/internal/giveup"
)

// The retry package reads the header by giveup's name for it.
func TestHeaderIsTheOneTheClientReads(t *testing.T) {
	if Header != giveup.Header {
		t.Fatalf("pushback.Header %q, the client reads %q", Header, giveup.Header)
	}
}
