package grpcretry_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The wiring in the package documentation is code that compiles and runs:
// each of its lines is a line of Example_wiring.
func TestDocWiringIsTheExample(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	example, err := os.ReadFile("example_wiring_test.go")
	require.NoError(t, err)
	code := map[string]bool{}
	for _, line := range strings.Split(string(example), "\n") {
		code[strings.TrimSpace(line)] = true
	}
	_, wiring, ok := strings.Cut(string(doc), "// # Wiring\n//\n")
	require.True(t, ok, "doc.go has a Wiring section")
	n := 0
	for _, line := range strings.Split(wiring, "\n") {
		snippet, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		n++
		require.True(t, code[strings.TrimSpace(snippet)], "doc.go's wiring line %q is not in Example_wiring", snippet)
	}
	require.Equal(t, 4, n, "the wiring's lines")
}
