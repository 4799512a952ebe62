// Package opspage serves the operator page (module opsui) for a demo, on
// a loopback address of its own, showing the scenario that runs now.
package opspage

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry/opsui"
)

// Page is the operator page of a demo. Show points it at the Runner and
// clients of the scenario that runs now.
type Page struct {
	srv  *http.Server
	done chan struct{}
	ui   atomic.Pointer[opsui.Handler]
	// URL is the page's address.
	URL string
}

// Start serves the page on a new loopback listener and prints its address
// to w.
func Start(w io.Writer) (*Page, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Page{done: make(chan struct{}), URL: "http://" + ln.Addr().String() + opsui.DefaultPath + "/"}
	mux := http.NewServeMux()
	mux.Handle(opsui.DefaultPath+"/", p)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(w, "operator page:", err)
		}
	}()
	fmt.Fprintf(w, "operator page: %s\n", p.URL)
	return p, nil
}

// Show makes the page show what opts name; requests come only from this
// machine (the page listens on loopback), so every one may view and act.
func (p *Page) Show(opts opsui.Config) {
	if p == nil {
		return
	}
	opts.Authorize = loopbackOnly
	p.ui.Store(opsui.New(opts))
}

// ServeHTTP serves the page shown last.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ui := p.ui.Load()
	if ui == nil {
		http.Error(w, "no scenario has started yet", http.StatusServiceUnavailable)
		return
	}
	ui.ServeHTTP(w, r)
}

// Close stops the page.
func (p *Page) Close() {
	if p == nil {
		return
	}
	_ = p.srv.Close()
	<-p.done
}

// loopbackOnly lets requests from this machine view and act.
func loopbackOnly(r *http.Request, _ opsui.Action) error {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return errors.New("the demo's page answers this machine only")
	}
	return nil
}
