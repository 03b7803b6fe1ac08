package kubelettest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
)

// Hostile is how a broken or hostile kubelet answers List; one of its
// fields is set.
type Hostile struct {
	// Answer is the message every List gets (the protobuf bytes, without
	// gRPC's length prefix): EmptyContainers or EmptyDeviceIDs, say.
	Answer []byte
	// Silent accepts connections and reads them, and never writes a byte.
	Silent bool
	// Flood answers each List with an empty list, then sends frames of
	// this type on the connection without end: FloodPing or FloodSettings.
	Flood string
}

// Flood frame types.
const (
	FloodPing     = "ping"
	FloodSettings = "settings"
)

// HostileServer is a kubelet socket served as Hostile says.
type HostileServer struct {
	socket string
	mode   Hostile
	l      net.Listener
	hs     *http.Server

	accepted, open, frames atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartHostile serves h on socket until Stop.
func StartHostile(socket string, h Hostile) (*HostileServer, error) {
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("hostile kubelet: listen on %s: %w", socket, err)
	}
	s := &HostileServer{socket: socket, mode: h, l: l, conns: map[net.Conn]struct{}{}}
	if h.Answer != nil {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		s.hs = &http.Server{Handler: http.HandlerFunc(s.answer), Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = s.hs.Serve(countingListener{l, s}) }()
		return s, nil
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Socket is the path the server listens on.
func (s *HostileServer) Socket() string { return s.socket }

// Accepted is the number of connections accepted so far.
func (s *HostileServer) Accepted() int { return int(s.accepted.Load()) }

// Open is the number of accepted connections the client has not closed.
func (s *HostileServer) Open() int { return int(s.open.Load()) }

// Frames is the number of flood frames written so far.
func (s *HostileServer) Frames() int64 { return s.frames.Load() }

// Stop closes the listener and every connection, and removes the socket.
func (s *HostileServer) Stop() {
	_ = s.l.Close()
	if s.hs != nil {
		_ = s.hs.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	_ = os.Remove(s.socket)
}

// track counts c open until the returned func is called.
func (s *HostileServer) track(c net.Conn) func() {
	s.accepted.Add(1)
	s.open.Add(1)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
		s.open.Add(-1)
	}
}

type countingListener struct {
	net.Listener
	s *HostileServer
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c, done: l.s.track(c)}, nil
}

type trackedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *trackedConn) Close() error {
	c.once.Do(c.done)
	return nil
}

func (s *HostileServer) answer(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(s.mode.Answer)))
	_, _ = w.Write(prefix[:])
	_, _ = w.Write(s.mode.Answer)
	w.Header().Set("Grpc-Status", "0")
}

func (s *HostileServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		done := s.track(c)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer done()
			if s.mode.Silent {
				// Read what the client sends, and answer nothing, until it
				// closes the connection.
				_, _ = io.Copy(io.Discard, c)
				return
			}
			s.flood(c)
		}()
	}
}

// flood speaks just enough HTTP/2 to answer each List with an empty list,
// and after the first, writes flood frames until the client goes.
func (s *HostileServer) flood(c net.Conn) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	var wmu sync.Mutex
	write := func(f func() error) error {
		wmu.Lock()
		defer wmu.Unlock()
		return f()
	}
	if write(func() error { return fr.WriteSettings() }) != nil {
		return
	}
	var once sync.Once
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = write(fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = write(func() error { return fr.WritePing(true, f.Data) })
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				id := f.StreamID
				if write(func() error { return writeEmptyAnswer(fr, id) }) != nil {
					return
				}
				once.Do(func() { go s.floodFrames(fr, write) })
			}
		}
	}
}

func (s *HostileServer) floodFrames(fr *http2.Framer, write func(func() error) error) {
	var data [8]byte
	for i := uint64(0); ; i++ {
		binary.BigEndian.PutUint64(data[:], i)
		var err error
		if s.mode.Flood == FloodSettings {
			err = write(func() error { return fr.WriteSettings() })
		} else {
			err = write(func() error { return fr.WritePing(false, data) })
		}
		if err != nil {
			return
		}
		s.frames.Add(1)
	}
}

// writeEmptyAnswer writes a gRPC answer holding an empty pod list, and
// status OK, on stream id.
func writeEmptyAnswer(fr *http2.Framer, id uint32) error {
	block := func(fields ...string) []byte {
		var b bytes.Buffer
		enc := hpack.NewEncoder(&b)
		for i := 0; i < len(fields); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return b.Bytes()
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
		BlockFragment: block(":status", "200", "content-type", "application/grpc")}); err != nil {
		return err
	}
	if err := fr.WriteData(id, false, make([]byte, 5)); err != nil {
		return err
	}
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
		BlockFragment: block("grpc-status", "0")})
}

// EmptyContainers is a List answer of about size bytes: one pod holding
// empty container entries, two bytes each, as many as fit.
func EmptyContainers(size int) []byte {
	var pod []byte
	pod = protowire.AppendTag(pod, 1, protowire.BytesType)
	pod = protowire.AppendString(pod, "hostile")
	pod = protowire.AppendTag(pod, 2, protowire.BytesType)
	pod = protowire.AppendString(pod, "default")
	for len(pod)+2 <= size-8 {
		pod = protowire.AppendTag(pod, 3, protowire.BytesType)
		pod = protowire.AppendVarint(pod, 0)
	}
	return wrapPod(pod)
}

// EmptyDeviceIDs is a List answer of about size bytes: one pod with one
// container holding one device entry of empty device IDs, two bytes each.
func EmptyDeviceIDs(size int) []byte {
	var dev []byte
	dev = protowire.AppendTag(dev, 1, protowire.BytesType)
	dev = protowire.AppendString(dev, "nvidia.com/gpu")
	for len(dev)+2 <= size-64 {
		dev = protowire.AppendTag(dev, 2, protowire.BytesType)
		dev = protowire.AppendVarint(dev, 0)
	}
	var ctr []byte
	ctr = protowire.AppendTag(ctr, 1, protowire.BytesType)
	ctr = protowire.AppendString(ctr, "main")
	ctr = protowire.AppendTag(ctr, 2, protowire.BytesType)
	ctr = protowire.AppendBytes(ctr, dev)
	var pod []byte
	pod = protowire.AppendTag(pod, 1, protowire.BytesType)
	pod = protowire.AppendString(pod, "hostile")
	pod = protowire.AppendTag(pod, 2, protowire.BytesType)
	pod = protowire.AppendString(pod, "default")
	pod = protowire.AppendTag(pod, 3, protowire.BytesType)
	pod = protowire.AppendBytes(pod, ctr)
	return wrapPod(pod)
}

func wrapPod(pod []byte) []byte {
	out := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(out, pod)
}

// ErrUnknownHostile is a hostile mode the fake kubelet command does not
// know.
var ErrUnknownHostile = errors.New("unknown hostile mode (want containers, device-ids, silent, ping-flood or settings-flood)")

// HostileMode is the Hostile a mode of the fake kubelet command names, with
// answers of size bytes.
func HostileMode(mode string, size int) (Hostile, error) {
	switch mode {
	case "containers":
		return Hostile{Answer: EmptyContainers(size)}, nil
	case "device-ids":
		return Hostile{Answer: EmptyDeviceIDs(size)}, nil
	case "silent":
		return Hostile{Silent: true}, nil
	case "ping-flood":
		return Hostile{Flood: FloodPing}, nil
	case "settings-flood":
		return Hostile{Flood: FloodSettings}, nil
	}
	return Hostile{}, fmt.Errorf("%q: %w", mode, ErrUnknownHostile)
}
