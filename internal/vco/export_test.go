package vco

// OpInfo describes one client operation for the conformance test.
type OpInfo struct{ Name, Method, Path string }

// Operations lists every operation the client can call.
func Operations() []OpInfo {
	out := make([]OpInfo, 0, len(operations))
	for _, o := range operations {
		out = append(out, OpInfo{o.name, o.method, o.path})
	}
	return out
}
