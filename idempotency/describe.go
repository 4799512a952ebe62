package idempotency

import (
	"iter"
	"net/http"
)

// StoredSteps decodes r.RecoveryData into the completed steps, for an
// operator's view of an execution: each step's name and result, in the
// order they completed (nil data: no step). On an error the sequence is
// empty.
func (r Record) StoredSteps() (iter.Seq2[string, []byte], error) {
	var steps []stepResult
	if len(r.RecoveryData) > 0 {
		var err error
		if steps, err = decodeSteps(r.RecoveryData); err != nil {
			return func(func(string, []byte) bool) {}, err
		}
	}
	return func(yield func(string, []byte) bool) {
		for _, s := range steps {
			if !yield(s.name, s.result) {
				return
			}
		}
	}, nil
}

// StoredWork decodes r.Resume: the name of the work that resumes the
// execution (Request.Work, or the Middleware's WithResume name) and its
// input (for the Middleware, the encoded request).
func (r Record) StoredWork() (name string, input []byte, err error) {
	return decodeResume(r.Resume)
}

// StoredHTTPResponse decodes r.Response as stored by the Middleware: the
// status, header and body of the outcome. A response stored by Runner.Do
// is the Work's own bytes, which usually fail to decode.
func (r Record) StoredHTTPResponse() (status int, header http.Header, body []byte, err error) {
	var w capture
	if err := writeStored(&w, r.Response, false); err != nil {
		return 0, nil, nil, err
	}
	return w.status, w.header, w.body, nil
}

// capture is a ResponseWriter that keeps what is written to it.
type capture struct {
	status int
	header http.Header
	body   []byte
}

func (c *capture) Header() http.Header {
	if c.header == nil {
		c.header = http.Header{}
	}
	return c.header
}

func (c *capture) WriteHeader(status int) { c.status = status }

func (c *capture) Write(p []byte) (int, error) {
	c.body = append(c.body, p...)
	return len(p), nil
}
