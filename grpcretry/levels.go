package grpcretry

import (
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// maxCachedMethods bounds the methods whose idempotency a client or server
// remembers; past it, a method's is looked up on every call.
const maxCachedMethods = 4096

// methodInfo is what the descriptor of a method says.
type methodInfo struct {
	level descriptorpb.MethodOptions_IdempotencyLevel
	desc  protoreflect.MethodDescriptor // nil when the method is not registered
}

// safe reports whether the method may be repeated as it is: it declares
// no side effects or an idempotent one.
func (m methodInfo) safe() bool {
	return m.level == descriptorpb.MethodOptions_NO_SIDE_EFFECTS || m.level == descriptorpb.MethodOptions_IDEMPOTENT
}

// methods looks methods up in the registry of the program's compiled
// protos (protoregistry.GlobalFiles: every generated package registers its
// files there) and remembers what it found.
type methods struct {
	mu    sync.RWMutex
	known map[string]methodInfo // by full method name, "/pkg.Service/Method"
}

// info returns what the descriptor of fullMethod ("/pkg.Service/Method")
// says; a method not registered is IDEMPOTENCY_UNKNOWN.
func (ms *methods) info(fullMethod string) methodInfo {
	ms.mu.RLock()
	m, ok := ms.known[fullMethod]
	ms.mu.RUnlock()
	if ok {
		return m
	}
	m = lookupMethod(fullMethod)
	ms.mu.Lock()
	if ms.known == nil {
		ms.known = make(map[string]methodInfo)
	}
	if len(ms.known) < maxCachedMethods {
		ms.known[fullMethod] = m
	}
	ms.mu.Unlock()
	return m
}

// lookupMethod finds fullMethod's descriptor in protoregistry.GlobalFiles.
func lookupMethod(fullMethod string) methodInfo {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return methodInfo{}
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return methodInfo{}
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return methodInfo{}
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return methodInfo{}
	}
	opts, _ := md.Options().(*descriptorpb.MethodOptions)
	return methodInfo{level: opts.GetIdempotencyLevel(), desc: md}
}
