package smicapture

import (
	"fmt"
	"regexp"
	"strings"
)

// Node is one line of `nvidia-smi -q`: a key with a value, or a heading
// with the lines indented beneath it.
type Node struct {
	Key      string
	Value    Value
	HasValue bool
	Children []*Node
	// Line is the line number in the capture file.
	Line int
}

// Child is the first child named key, nil if none.
func (n *Node) Child(key string) *Node {
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		if c.Key == key {
			return c
		}
	}
	return nil
}

// All is every child named key, in order.
func (n *Node) All(key string) []*Node {
	if n == nil {
		return nil
	}
	var out []*Node
	for _, c := range n.Children {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

// Get follows a path of keys; a missing node is an unsupported value.
func (n *Node) Get(path ...string) Value {
	for _, k := range path {
		n = n.Child(k)
	}
	if n == nil || !n.HasValue {
		return Value{Raw: "(absent)"}
	}
	return n.Value
}

// GPU is one GPU of a snapshot.
type GPU struct {
	// BusID is the heading of its -q block, "00000000:00:09.0".
	BusID string
	// Q is its -q block.
	Q *Node
	// CSV holds its --query-gpu row by field name (without the unit).
	CSV map[string]Value
	// MIG are the MIG devices -q lists, in order.
	MIG []MIGDevice
	// Processes are the processes -q lists.
	Processes []Process
	// Apps are the rows of --query-compute-apps for this GPU.
	Apps []App
}

// Field is a --query-gpu value; a field the capture did not query is an
// absent, unsupported value.
func (g *GPU) Field(name string) Value {
	v, ok := g.CSV[name]
	if !ok {
		return Value{Raw: "(absent)"}
	}
	return v
}

// MIGDevice is one "MIG Device" block of -q.
type MIGDevice struct {
	Index, GPUInstanceID, ComputeInstanceID          int
	SMs, CopyEngines, Decoders, Encoders, JPGs, OFAs int
	// Memory in MiB.
	TotalMiB, ReservedMiB, UsedMiB, FreeMiB float64
}

// Process is one entry of the Processes block of -q; the instance IDs are
// -1 where nvidia-smi prints N/A (no MIG).
type Process struct {
	PID                              int
	GPUInstanceID, ComputeInstanceID int
	Type, Name                       string
	UsedMiB                          float64
	UsedSupported                    bool
}

// App is one row of --query-compute-apps.
type App struct {
	PID     int
	Name    string
	UUID    string
	UsedMiB float64
}

var kvRe = regexp.MustCompile(`^( *)(\S.*?)\s+:(?: (.*))?$`)

func parseQuery(sn *Snapshot, s section) error {
	root := &Node{}
	type frame struct {
		indent int
		n      *Node
	}
	stack := []frame{{-1, root}}
	for i, l := range s.body {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "====") {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		n := &Node{Line: s.line + 4 + i}
		if m := kvRe.FindStringSubmatch(l); m != nil {
			n.Key, n.Value, n.HasValue = m[2], NewValue(m[3]), true
		} else {
			n.Key = strings.TrimSpace(l)
		}
		for len(stack) > 1 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		parent := stack[len(stack)-1].n
		parent.Children = append(parent.Children, n)
		stack = append(stack, frame{indent, n})
	}
	sn.DriverVersion = root.Get("Driver Version").Text()
	sn.CUDAVersion = root.Get("CUDA Version").Text()
	for _, c := range root.Children {
		if !strings.HasPrefix(c.Key, "GPU ") || c.HasValue {
			continue
		}
		g := &GPU{BusID: strings.TrimPrefix(c.Key, "GPU "), Q: c, CSV: map[string]Value{}}
		for _, m := range c.All("MIG Device") {
			d, err := parseMIG(m)
			if err != nil {
				return err
			}
			g.MIG = append(g.MIG, d)
		}
		ps, err := parseProcesses(c.Child("Processes"))
		if err != nil {
			return err
		}
		g.Processes = ps
		sn.GPUs = append(sn.GPUs, g)
	}
	if len(sn.GPUs) == 0 {
		return fmt.Errorf("line %d: nvidia-smi -q lists no GPU", s.line)
	}
	return nil
}

func num(n *Node, path ...string) (float64, error) {
	v := n.Get(path...)
	f, ok := v.Number()
	if !ok {
		return 0, fmt.Errorf("line %d: %s: %q is not a number", n.Line, strings.Join(path, "/"), v.Raw)
	}
	return f, nil
}

func parseMIG(m *Node) (MIGDevice, error) {
	var d MIGDevice
	var err error
	get := func(dst *int, path ...string) {
		if err != nil {
			return
		}
		var f float64
		f, err = num(m, path...)
		*dst = int(f)
	}
	getF := func(dst *float64, path ...string) {
		if err != nil {
			return
		}
		*dst, err = num(m, path...)
	}
	get(&d.Index, "Index")
	get(&d.GPUInstanceID, "GPU Instance ID")
	get(&d.ComputeInstanceID, "Compute Instance ID")
	attr := []string{"Device Attributes", "Shared"}
	get(&d.SMs, append(attr, "Multiprocessor count")...)
	get(&d.CopyEngines, append(attr, "Copy Engine count")...)
	get(&d.Encoders, append(attr, "Encoder count")...)
	get(&d.Decoders, append(attr, "Decoder count")...)
	get(&d.OFAs, append(attr, "OFA count")...)
	get(&d.JPGs, append(attr, "JPG count")...)
	getF(&d.TotalMiB, "Shared FB Memory Usage", "Total")
	getF(&d.ReservedMiB, "Shared FB Memory Usage", "Reserved")
	getF(&d.UsedMiB, "Shared FB Memory Usage", "Used")
	getF(&d.FreeMiB, "Shared FB Memory Usage", "Free")
	return d, err
}

// parseProcesses reads the Processes block: each "Process ID" line follows
// its "GPU instance ID" and "Compute instance ID" lines, and holds the
// type, name and memory beneath it.
func parseProcesses(n *Node) ([]Process, error) {
	var out []Process
	gi, ci := -1, -1
	for _, c := range n.Children2() {
		idOf := func() int {
			if f, ok := c.Value.Number(); ok {
				return int(f)
			}
			return -1
		}
		switch c.Key {
		case "GPU instance ID":
			gi = idOf()
		case "Compute instance ID":
			ci = idOf()
		case "Process ID":
			pid, ok := c.Value.Number()
			if !ok {
				return nil, fmt.Errorf("line %d: Process ID %q is not a number", c.Line, c.Value.Raw)
			}
			p := Process{PID: int(pid), GPUInstanceID: gi, ComputeInstanceID: ci,
				Type: c.Get("Type").Text(), Name: c.Get("Name").Text()}
			p.UsedMiB, p.UsedSupported = c.Get("Used GPU Memory").Number()
			out = append(out, p)
			gi, ci = -1, -1
		}
	}
	return out, nil
}

// Children2 is the node's children, none for a nil node.
func (n *Node) Children2() []*Node {
	if n == nil {
		return nil
	}
	return n.Children
}
