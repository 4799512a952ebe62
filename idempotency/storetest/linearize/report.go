package linearize

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/anishathalye/porcupine"
)

// writeReport writes a history that failed the check into dir: history.txt,
// which lists, for every key whose calls cannot be linearized, the longest
// order of its calls that the model accepts (with the record after each)
// and then every call of that key in the order they began; and
// history.html, porcupine's visualization of the whole history.
func writeReport(dir string, c checker, model porcupine.Model, ops []porcupine.Operation,
	info porcupine.LinearizationInfo, verdict porcupine.CheckResult, cfg Config) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	text := filepath.Join(dir, "history.txt")
	html := filepath.Join(dir, "history.html")
	f, err := os.Create(text)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "Linearizability check: %s (seed %d, %d clients, %d epochs of %d calls each)\n",
		verdictName(verdict), cfg.Seed, cfg.Clients, cfg.Epochs, cfg.OpsPerEpoch)
	fmt.Fprintf(w, "Times are model minutes from the start of the run; t= is the time of the call's epoch.\n")
	fmt.Fprintf(w, "A fence is attempt/generation. Call and return are nanoseconds since the run began.\n")
	for k := range c.keys {
		var part []porcupine.Operation
		for _, op := range ops {
			if op.Input.(input).Key == k {
				part = append(part, op)
			}
		}
		if len(part) == 0 || porcupine.CheckOperations(model, part) {
			continue
		}
		fmt.Fprintf(w, "\n== key (%q, %q): %d calls, not linearizable\n", c.keys[k][0], c.keys[k][1], len(part))
		longestPrefix(w, c, part)
		slices.SortStableFunc(part, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		fmt.Fprintf(w, "\n-- every call on the key, by start:\n")
		for _, op := range part {
			fmt.Fprintf(w, "[%12d .. %12d] client %d: %s\n", op.Call, op.Return, op.ClientId, c.describe(op.Input.(input), op.Output.(output)))
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := porcupine.VisualizePath(model, info, html); err != nil {
		return []string{text}, err
	}
	return []string{text, html}, nil
}

// longestPrefix writes the longest order of part's calls that the model
// accepts, found by a bounded search, with the record after each call.
func longestPrefix(w *bufio.Writer, c checker, part []porcupine.Operation) {
	_, info := porcupine.CheckOperationsVerbose(c.model(), part, 0)
	var best []porcupine.Operation
	for _, p := range info.PartialLinearizationsOperations() {
		for _, lin := range p {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	fmt.Fprintf(w, "-- the longest linearization found (%d of %d calls); no call left can come next:\n", len(best), len(part))
	s := state{}
	for _, op := range best {
		in, out := op.Input.(input), op.Output.(output)
		_, s = c.step(s, in, out)
		fmt.Fprintf(w, "  client %d: %s\n      record: %s\n", op.ClientId, c.describe(in, out), describeState(s))
	}
}

func verdictName(v porcupine.CheckResult) string {
	switch v {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "unknown (the checker ran out of time)"
}
