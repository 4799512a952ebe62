// Command modcheck fails when a module of the workspace requires a module
// that its code does not need, so that a user's module graph gains only
// what the packages it imports use. Run from the repository's root:
//
//	go run ./internal/modcheck
//
// For every module in go.work, built on its own (GOWORK=off) as a user's
// build would see it, it checks that:
//
//   - every requirement not marked "// indirect" provides a package that
//     the module's non-test packages import, directly or through their
//     dependencies, or is one of the test libraries every module may use
//     (testify and goleak);
//   - its tests import nothing else: no package of a module outside that
//     set (another store's module, a driver or a broker client the code
//     does not use, internal/drill, storetest/linearize...);
//   - go mod tidy would change nothing: no requirement, indirect ones too,
//     is left over or missing;
//   - every replace directive names a module of its module graph.
//
// Tests that need more live in modules of their own that hold only tests
// (the integration modules, opsui/browser, sdks): a module none of whose
// packages has a non-test Go file cannot be imported, so what it requires
// reaches no user's build: only its tidiness and its replace directives
// are checked.
//
// It looks at the packages as built for the machine's GOOS and GOARCH.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// platforms are the GOOS values whose builds are checked: a package may
// import a module in files built for one of them only.
var platforms = []string{"linux", "darwin", "windows"}

// testLibraries are the modules every module may require for its tests.
var testLibraries = []string{
	"github.com/stretchr/testify",
	"go.uber.org/goleak",
}

func main() {
	dirs, err := workspaceModules()
	if err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(2)
	}
	failed := false
	for _, dir := range dirs {
		problems, testsOnly, err := check(dir)
		if err != nil {
			// A module whose graph cannot even be loaded on its own (a
			// requirement with no replace directive, say) fails too.
			problems = append(problems, strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "\n      "))
		}
		what := "code and tests"
		switch {
		case err != nil:
			what = "not loaded"
		case testsOnly:
			what = "tests only"
		}
		if len(problems) == 0 {
			fmt.Printf("ok    %s (%s)\n", rel(dir), what)
			continue
		}
		failed = true
		fmt.Printf("FAIL  %s (%s)\n", rel(dir), what)
		for _, p := range problems {
			fmt.Printf("      %s\n", p)
		}
	}
	if failed {
		fmt.Println("\nA module's go.mod may require only what its non-test packages need, plus testify and goleak for its tests.\n" +
			"Move a test that needs more into a module that holds only tests (as natsconsumer/integration does), then run\n" +
			"GOWORK=off go mod tidy in both modules and drop the replace directives that are no longer needed.")
		os.Exit(1)
	}
}

// workspaceModules returns the directories of the modules in go.work.
func workspaceModules() ([]string, error) {
	out, err := goCmd("", true, "list", "-m", "-f", "{{.Dir}}")
	if err != nil {
		return nil, err
	}
	return lines(out), nil
}

// goMod is the part of go mod edit -json that modcheck reads.
type goMod struct {
	Module  struct{ Path string }
	Require []struct {
		Path     string
		Indirect bool
	}
	Replace []struct {
		Old struct{ Path string }
	}
}

// check returns what is wrong with the go.mod of the module in dir, and
// whether the module holds only tests.
func check(dir string) (problems []string, testsOnly bool, err error) {
	out, err := goCmd(dir, false, "mod", "edit", "-json")
	if err != nil {
		return nil, false, err
	}
	var mod goMod
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, false, fmt.Errorf("go mod edit -json: %v", err)
	}
	self := mod.Module.Path

	// Replace directives: each names a module of the module graph.
	out, err = goCmd(dir, false, "list", "-m", "-f", "{{.Path}}", "all")
	if err != nil {
		return nil, false, err
	}
	graph := set(lines(out))
	for _, r := range mod.Replace {
		if !graph[r.Old.Path] {
			problems = append(problems, fmt.Sprintf("replaces %s, which is not in its module graph: drop the replace directive", r.Old.Path))
		}
	}

	// The requirements are those go mod tidy keeps: none left over,
	// none missing.
	if _, err := goCmd(dir, false, "mod", "tidy", "-diff"); err != nil {
		problems = append(problems, "go.mod or go.sum is not tidy: run GOWORK=off go mod tidy ("+firstLine(err.Error())+")")
	}

	// Packages with a non-test Go file: none means a module of tests only.
	out, err = goCmd(dir, false, "list", "-e", "-f", "{{len .GoFiles}}{{len .CgoFiles}}", "./...")
	if err != nil {
		return nil, false, err
	}
	testsOnly = !slices.ContainsFunc(lines(out), func(l string) bool { return l != "00" })
	if testsOnly {
		return problems, true, nil
	}

	// What the non-test packages need: the modules of their dependencies,
	// on each of the platforms users build for most.
	allowed := set(testLibraries)
	allowed[self] = true
	var imports []string
	for _, goos := range platforms {
		out, err = goCmd(dir, false, "GOOS="+goos, "list", "-e", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
		if err != nil {
			return nil, false, err
		}
		for _, m := range lines(out) {
			allowed[m] = true
		}
		// The packages its tests import directly.
		out, err = goCmd(dir, false, "GOOS="+goos, "list", "-e", "-f", "{{range .TestImports}}{{.}}\n{{end}}{{range .XTestImports}}{{.}}\n{{end}}", "./...")
		if err != nil {
			return nil, false, err
		}
		imports = append(imports, lines(out)...)
	}

	for _, r := range mod.Require {
		if !r.Indirect && !allowed[r.Path] {
			problems = append(problems, fmt.Sprintf("requires %s, which none of its non-test packages needs", r.Path))
		}
	}

	imports = slices.Compact(slices.Sorted(slices.Values(imports)))
	if len(imports) > 0 {
		args := append([]string{"list", "-e", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}"}, imports...)
		out, err = goCmd(dir, false, args...)
		if err != nil {
			return nil, false, err
		}
		for _, l := range lines(out) {
			pkg, module, _ := strings.Cut(l, " ")
			if module != "" && !allowed[module] {
				problems = append(problems, fmt.Sprintf("its tests import %s, of %s, which none of its non-test packages needs", pkg, module))
			}
		}
	}

	return problems, false, nil
}

// goCmd runs the go command in dir, in the workspace or (the default) on
// the module's own go.mod, and returns its standard output. Leading
// arguments of the form NAME=value are set in its environment.
func goCmd(dir string, workspace bool, args ...string) ([]byte, error) {
	env := os.Environ()
	if !workspace {
		env = append(env, "GOWORK=off")
	}
	for len(args) > 0 && strings.Contains(args[0], "=") {
		env = append(env, args[0])
		args = args[1:]
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// firstLine returns the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// lines returns the non-empty lines of out.
func lines(out []byte) []string {
	var l []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			l = append(l, s)
		}
	}
	return l
}

// set returns the strings of l as a set.
func set(l []string) map[string]bool {
	s := make(map[string]bool, len(l))
	for _, v := range l {
		s[v] = true
	}
	return s
}

// rel returns dir relative to the working directory, or dir.
func rel(dir string) string {
	wd, err := os.Getwd()
	if err != nil {
		return dir
	}
	if r, err := filepath.Rel(wd, dir); err == nil {
		return r
	}
	return dir
}
