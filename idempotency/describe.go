package idempotency

import (
	"net/http"
)

// StoredStep is one completed step of an execution, as saved in
// Record.RecoveryData: its name and its result.
type StoredStep struct {
	Name   string
	Result []byte
}

// StoredSteps decodes r.RecoveryData into the completed steps, for an
// operator's view of an execution (nil data: no step).
func (r Record) StoredSteps() ([]StoredStep, error) {
	data := r.RecoveryData
	if len(data) == 0 {
		return nil, nil
	}
	steps, err := decodeSteps(data)
	if err != nil {
		return nil, err
	}
	out := make([]StoredStep, len(steps))
	for i, s := range steps {
		out[i] = StoredStep{Name: s.name, Result: s.result}
	}
	return out, nil
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
