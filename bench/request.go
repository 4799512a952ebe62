package bench

import (
	"bytes"
	"context"
	"net/http"
)

// newRequest makes a request tagged with the logical request id. A body is
// given with GetBody (bytes.Reader), as http.NewRequest does.
func newRequest(ctx context.Context, method, url, id string, body []byte) (*http.Request, error) {
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	} else {
		req, err = http.NewRequestWithContext(ctx, method, url, nil)
	}
	if err != nil {
		return nil, err
	}
	if id != "" {
		req.Header.Set(RequestIDHeader, id)
	}
	return req, nil
}
