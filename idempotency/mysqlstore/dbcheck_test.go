package mysqlstore_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without the database, the package's tests say once what they need and
// how to start it, and fail: they never skip, so CI cannot pass without them.
func TestWithoutDatabaseSaysWhatItNeeds(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: the connection is refused at once. The
	// child runs a test that needs no server, so only the check can fail it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenRefusesBadSettings$", "-test.count=1")
	cmd.Env = append(os.Environ(), dsnEnv+"=root@tcp(127.0.0.1:1)/test")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the tests passed without a database: %v\n%s", err, out)
	text := string(out)
	assert.Equal(t, 1, strings.Count(text, "need MariaDB"), "say it once:\n%s", text)
	for _, want := range []string{"127.0.0.1:3306", dsnEnv, "mariadbd", "127.0.0.1:1"} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "--- FAIL", "no test ran")
}
