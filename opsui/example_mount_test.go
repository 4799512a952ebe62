package opsui_test

import (
	"errors"
	"log"
	"net/http"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// The operator page guide's mounting: the page beside the service's API,
// with a Transport's dependencies shown. (Compiled, not run.)
func Example_mount() {
	var (
		runner = idempotency.NewRunner(nil)
		tr     = retry.NewTransport(http.DefaultTransport)
		mux    = http.NewServeMux()
		addr   = "127.0.0.1:8080"
	)
	allowOperators := func(r *http.Request, a opsui.Action) error { return errors.New("not an operator") }

	ui := opsui.New(opsui.Config{Runner: runner, Authorize: allowOperators, Clients: []opsui.Client{opsui.TransportClient("payments", tr)}})
	mux.Handle(opsui.DefaultPath+"/", ui) // /debug/exactlyonce/
	log.Printf("operator page: http://%s%s/", addr, opsui.DefaultPath)
}
