package sdks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82"

	"github.com/exactlyonce/retry"
)

// stripeAPI fakes POST /v1/customers: it honours keys as Stripe does
// (echoes them, replays the first outcome) and answers faults with Stripe's
// JSON errors, or, for a 503 from a proxy in front, with HTML.
func stripeAPI(t *testing.T, f *fake, html bool) *httptest.Server {
	f.honours = true
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, func() []byte {
			n++
			return fmt.Appendf(nil, `{"id":"cus_%d","object":"customer"}`, n)
		}, func(status int) (string, string) {
			if html && status == 503 {
				return "text/html", "<html>503 Service Unavailable</html>"
			}
			code := map[int]string{503: "api_error", 429: "lock_timeout", 409: "idempotency_error"}[status]
			return "application/json", fmt.Sprintf(`{"error":{"type":"api_error","code":%q,"message":"fault"}}`, code)
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// stripeSleep is stripe-go v82's wait before its retry n (from 0), at its
// longest: 500 ms x (1 + n²), at most 5 s, less up to a quarter of jitter,
// at least 500 ms. The tests turn its sleeping off and add these up.
func stripeSleep(n int) time.Duration {
	return min(500*time.Millisecond*time.Duration(1+n*n), 5*time.Second)
}

// runStripe creates one customer with stripe-go over stack s.
func runStripe(t *testing.T, s stack, f *fake, html bool) (result, *layers) {
	srv := stripeAPI(t, f, html)
	var opts []retry.Option
	retries := stripe.DefaultMaxNetworkRetries
	if s == offOverOur {
		retries = 0
		// The recipe: Stripe honours keys; its SDK's headers no longer
		// tell of a layer that retries.
		opts = append(opts, retry.WithoutYielding(), retry.WithKeysHonoured())
	}
	l, hc := newLayers(t, s, opts...)
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(srv.URL), HTTPClient: hc, MaxNetworkRetries: stripe.Int64(retries),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}).(*stripe.BackendImplementation)
	b.SetNetworkRetriesSleep(false)
	sc := stripe.NewClient("sk_test_123", stripe.WithBackends(&stripe.Backends{API: b, Connect: b, Uploads: b}))
	_, err := sc.V1Customers.Create(context.Background(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	var theirs time.Duration
	for n := range l.sdk - 1 {
		theirs += stripeSleep(n)
	}
	return l.result(f, theirs, err), l
}

func TestStripeUnderOurTransport(t *testing.T) {
	faults := []fault{f503, f429, f409, resetBefore, resetAfter}
	for _, html := range []bool{false, true} {
		for _, flt := range faults {
			if html && flt != f503 {
				continue
			}
			name := string(flt)
			if html {
				name += " (HTML)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var res [3]result
				for _, s := range []stack{alone, overOurs, offOverOur} {
					r, l := runStripe(t, s, newFake(flt), html)
					res[s] = r
					record(t, "stripe-go v82", fault(name), s, r)
					require.Error(t, r.err, "an always-failing call fails")
					assert.Zero(t, r.duplicates)
					if s != alone {
						// Stripe's own Idempotency-Key, as stripe-go set it, on every attempt.
						f := l.sent[0].Get("Idempotency-Key")
						require.NotEmpty(t, f)
						for _, h := range l.sent {
							assert.Equal(t, f, h.Get("Idempotency-Key"))
						}
					}
				}
				assert.LessOrEqual(t, res[overOurs].attempts, max(res[alone].attempts, res[offOverOur].attempts),
					"no more attempts than the larger layer alone")
				assert.LessOrEqual(t, res[overOurs].waits, 1, "no more time than the SDK's own waits and one of ours")
				assert.LessOrEqual(t, res[overOurs].sdk, res[alone].sdk, "the SDK's own attempts as alone")
			})
		}
	}
}

// A fault that passes: the customer is made once, with Stripe's key.
func TestStripeThroughTransientFaults(t *testing.T) {
	for _, flt := range []fault{f503, f429, resetBefore, resetAfter} {
		for _, s := range []stack{alone, overOurs, offOverOur} {
			t.Run(fmt.Sprint(flt, "/", s), func(t *testing.T) {
				f := newFake(pass, flt)
				r, l := runStripe(t, s, f, true)
				record(t, "stripe-go v82 (one fault)", flt, s, r)
				if r.err != nil {
					// stripe-go alone does not retry a Stripe error it has no
					// reason to; a reset may end in an error net/http gives
					// as its own (use of a closed connection), handed back.
					assert.True(t, s == alone || flt == resetAfter || flt == resetBefore, r.err)
				}
				assert.Zero(t, r.duplicates)
				for _, k := range f.keys {
					assert.Equal(t, l.sent[0].Get("Idempotency-Key"), k, "the key as stripe-go set it")
				}
			})
		}
	}
}
