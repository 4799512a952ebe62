package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"sort"
	"strings"
)

// dump returns the exported API of the package in dir: one declaration a
// line or block, sorted, without comments or bodies.
func dump(dir string) ([]byte, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s: %d packages, want 1", dir, len(pkgs))
	}
	var name string
	var files []*ast.File
	for n, p := range pkgs {
		name = n
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	d, err := doc.NewFromFiles(fset, files, "example.invalid/"+name)
	if err != nil {
		return nil, err
	}
	var lines []string
	add := func(node any) { lines = append(lines, render(fset, node)) }
	for _, v := range append(d.Consts, d.Vars...) {
		values(v, add)
	}
	for _, f := range d.Funcs {
		add(signature(f.Decl))
	}
	for _, t := range d.Types {
		add(&ast.GenDecl{Tok: token.TYPE, Specs: []ast.Spec{t.Decl.Specs[0]}})
		for _, v := range append(t.Consts, t.Vars...) {
			values(v, add)
		}
		for _, f := range append(t.Funcs, t.Methods...) {
			add(signature(f.Decl))
		}
	}
	sort.Strings(lines)
	var b bytes.Buffer
	fmt.Fprintf(&b, "package %s\n\n", name)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// values adds each exported name of a const or var group on its own.
func values(v *doc.Value, add func(any)) {
	for _, s := range v.Decl.Specs {
		vs := s.(*ast.ValueSpec)
		for i, id := range vs.Names {
			if !id.IsExported() {
				continue
			}
			one := &ast.ValueSpec{Names: []*ast.Ident{id}, Type: vs.Type}
			if i < len(vs.Values) {
				one.Values = []ast.Expr{vs.Values[i]}
			}
			add(&ast.GenDecl{Tok: v.Decl.Tok, Specs: []ast.Spec{one}})
		}
	}
}

// signature is a func declaration without its body and comment.
func signature(f *ast.FuncDecl) *ast.FuncDecl {
	return &ast.FuncDecl{Recv: f.Recv, Name: f.Name, Type: f.Type}
}

// render prints node on one line or, for a type's body, as gofmt would.
func render(fset *token.FileSet, node any) string {
	var b bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if err := cfg.Fprint(&b, fset, stripComments(node)); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	// The comments removed leave blank lines behind.
	return strings.ReplaceAll(b.String(), "\n\n", "\n")
}

// stripComments removes the comments of struct and interface fields.
func stripComments(node any) any {
	ast.Inspect(node.(ast.Node), func(n ast.Node) bool {
		if f, ok := n.(*ast.Field); ok {
			f.Doc, f.Comment = nil, nil
		}
		return true
	})
	return node
}
