// Command protogen compiles the grpcretry module's proto (paymentspb) to Go
// without protoc: it parses paymentspb/payments.proto with protocompile (a Go
// implementation of the protobuf compiler) and hands the result to the
// standard code generators, protoc-gen-go and protoc-gen-go-grpc, run as
// the plugins they are (go tool, at the versions pinned in this module's
// go.mod). It is a module of its own so that the grpcretry module needs
// none of this.
//
// Run it from the grpcretry module with go generate ./paymentspb, or here
// with GOWORK=off go run . ../../paymentspb payments.proto.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: protogen DIR FILE.proto")
		os.Exit(2)
	}
	if err := generate(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

// generate compiles file (relative to dir) and writes the generated Go
// files beside it.
func generate(dir, file string) error {
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{dir}}),
		SourceInfoMode: protocompile.SourceInfoStandard, // keeps the comments
	}
	files, err := compiler.Compile(context.Background(), file)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{file},
		Parameter:      proto.String("paths=source_relative"),
	}
	// Every file the plugins are given comes after the files it imports.
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		for i := range f.Imports().Len() {
			add(f.Imports().Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range files {
		add(f)
	}
	for _, plugin := range []string{"protoc-gen-go", "protoc-gen-go-grpc"} {
		if err := run(plugin, req, dir); err != nil {
			return fmt.Errorf("%s: %w", plugin, err)
		}
	}
	return nil
}

// run runs a code generator plugin on req and writes what it made in dir.
func run(plugin string, req *pluginpb.CodeGeneratorRequest, dir string) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command("go", "tool", plugin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out.Bytes(), &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("%s", resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(dir, f.GetName())
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
