package retry_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// codeMarker names, on the line before a go block of the README or a
// guide, the file (from the repository's root) and the function whose
// body holds the block's lines.
var codeMarker = regexp.MustCompile(`^<!-- code: (\S+) (\w+) -->$`)

// Every go block of the README and the guides is a piece of a function
// that CI compiles (an Example, mostly run too), named by a marker on the
// line before it, and its lines appear in that function's body in order,
// one after another: the docs cannot drift from the code.
func TestDocsCodeIsCompiled(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, doc := range append([]string{"README.md"}, docs...) {
		f, err := os.Open(doc)
		if err != nil {
			t.Fatal(err)
		}
		var (
			marker   string
			block    []string
			inBlock  bool
			blockAt  int
			sc       = bufio.NewScanner(f)
			lineNo   = 0
			previous string
		)
		for sc.Scan() {
			line := sc.Text()
			lineNo++
			switch {
			case !inBlock && line == "```go":
				inBlock, block, blockAt, marker = true, nil, lineNo, previous
			case inBlock && line == "```":
				inBlock = false
				blocks++
				checkBlock(t, doc, blockAt, marker, block)
			case inBlock:
				block = append(block, line)
			}
			previous = line
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if blocks == 0 {
		t.Fatal("no go block found in the README and the guides")
	}
}

// checkBlock checks one go block of doc, at line at, against the
// function its marker names.
func checkBlock(t *testing.T, doc string, at int, marker string, block []string) {
	t.Helper()
	m := codeMarker.FindStringSubmatch(marker)
	if m == nil {
		t.Errorf("%s:%d: a go block without a marker <!-- code: FILE FUNC --> on the line before it", doc, at)
		return
	}
	file, fn := m[1], m[2]
	body, err := functionBody(file, fn)
	if err != nil {
		t.Errorf("%s:%d: %v", doc, at, err)
		return
	}
	want := normalized(block)
	got := normalized(body)
	for i := 0; i+len(want) <= len(got); i++ {
		if slices.Equal(got[i:i+len(want)], want) {
			return
		}
	}
	t.Errorf("%s:%d: the block's lines are not in %s's body in %s, one after another; the code drifted:\n%s",
		doc, at, fn, file, strings.Join(block, "\n"))
}

// functionBody returns the lines of the body of the function fn in file.
func functionBody(file, fn string) ([]string, error) {
	src, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Body != nil {
			from, to := fset.Position(fd.Body.Lbrace).Offset+1, fset.Position(fd.Body.Rbrace).Offset
			return strings.Split(string(src[from:to]), "\n"), nil
		}
	}
	return nil, &os.PathError{Op: "find func " + fn, Path: file, Err: os.ErrNotExist}
}

// normalized returns the lines without blank ones, each with its runs
// of spaces and tabs made one space and trimmed (gofmt aligns trailing
// comments by their neighbours).
func normalized(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}
