package redisstore_test

import (
	"fmt"
	"os"
)

// childModeEnv, when set, makes the test binary run as a helper process.
const childModeEnv = "REDISSTORE_TEST_CHILD"

func childMain(mode string) int {
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}
