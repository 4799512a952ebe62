package sdks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// githubAPI fakes POST /repos/o/r/issues: like GitHub, it ignores keys, so
// every request that reaches it makes an issue.
func githubAPI(t *testing.T, f *fake) *httptest.Server {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.serve(w, r, func() []byte {
			n++
			return fmt.Appendf(nil, `{"number":%d,"title":"t"}`, n)
		}, func(status int) (string, string) {
			return "application/json", `{"message":"fault"}`
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runGitHub opens one issue with go-github (which retries nothing itself:
// its retries are off in every stack) over stack s.
func runGitHub(t *testing.T, s stack, f *fake) result {
	srv := githubAPI(t, f)
	l, hc := newLayers(t, s)
	c := github.NewClient(hc)
	c.BaseURL, _ = url.Parse(srv.URL + "/")
	_, _, err := c.Issues.Create(context.Background(), "o", "r", &github.IssueRequest{Title: github.String("t")})
	return l.result(f, 0, err)
}

func TestGitHubUnderOurTransport(t *testing.T) {
	for _, flt := range []fault{f503, f429, f409, resetBefore, resetAfter} {
		t.Run(string(flt), func(t *testing.T) {
			t.Parallel()
			var res [2]result
			for _, s := range []stack{alone, overOurs} {
				r := runGitHub(t, s, newFake(flt))
				res[s] = r
				record(t, "go-github v66 Issues.Create", flt, s, r)
				require.Error(t, r.err)
				assert.Zero(t, r.duplicates, "a server that ignores keys gets no duplicate issue")
			}
			assert.LessOrEqual(t, res[overOurs].waits, 1)
		})
	}
}

// One fault, then success: a reset after the issue was made is not resent
// to a server that ignores keys (one issue, the error handed back); the
// other faults are retried and the issue made once.
func TestGitHubThroughTransientFaults(t *testing.T) {
	for _, flt := range []fault{f503, f429, resetBefore, resetAfter} {
		for _, s := range []stack{alone, overOurs} {
			t.Run(fmt.Sprint(flt, "/", s), func(t *testing.T) {
				f := newFake(pass, flt)
				r := runGitHub(t, s, f)
				record(t, "go-github v66 Issues.Create (one fault)", flt, s, r)
				assert.Zero(t, r.duplicates)
				assert.LessOrEqual(t, f.effects, 1)
			})
		}
	}
}
