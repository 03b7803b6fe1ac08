package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultCipherSuites are the TLS 1.2 suites served when the web config
// names none: forward secrecy and AEAD only. Go's defaults, which
// exporter-toolkit keeps, also accept CBC suites with SHA-1 MACs. A web
// config's cipher_suites replaces the list, widening it where old
// scrapers need it; TLS 1.3's suites are not configurable.
var DefaultCipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

// tlsPathKeys are the web config's file names, read relative to the
// file's directory.
var tlsPathKeys = map[string]bool{"cert_file": true, "key_file": true, "client_ca_file": true}

// webConfigView is the web config as exporter-toolkit reads it: a copy of
// the operator's file with DefaultCipherSuites added where the file's
// tls_server_config names no suites, and its relative paths made
// absolute. The toolkit reads its file at every handshake and request, so
// the copy follows the file: sync rewrites it whenever the file's size or
// time changed.
type webConfigView struct {
	src, out string

	mu      sync.Mutex
	mod     time.Time
	size    int64
	written bool
}

func newWebConfigView(src string) (*webConfigView, error) {
	dir, err := os.MkdirTemp("", "gpuscope-web-config-")
	if err != nil {
		return nil, fmt.Errorf("web config %s: a directory for its effective copy: %w", src, err)
	}
	v := &webConfigView{src: src, out: filepath.Join(dir, "web-config.yml")}
	v.sync()
	return v, nil
}

// remove deletes the copy and its directory.
func (v *webConfigView) remove() { _ = os.RemoveAll(filepath.Dir(v.out)) }

// sync brings the copy up to date. A file that cannot be read or parsed
// is copied as it is, so the toolkit reports it as it would the file.
func (v *webConfigView) sync() {
	v.mu.Lock()
	defer v.mu.Unlock()
	fi, err := os.Stat(v.src)
	if err == nil && v.written && fi.ModTime().Equal(v.mod) && fi.Size() == v.size {
		return
	}
	b, rerr := os.ReadFile(v.src)
	if rerr != nil {
		_ = os.Remove(v.out) // the toolkit then fails to read it, as the file
		v.written = false
		return
	}
	eff := withTLSDefaults(b, filepath.Dir(v.src))
	tmp := v.out + ".tmp"
	if os.WriteFile(tmp, eff, 0o600) != nil || os.Rename(tmp, v.out) != nil {
		return
	}
	if err == nil {
		v.mod, v.size, v.written = fi.ModTime(), fi.Size(), true
	}
}

// withTLSDefaults returns the web config b with the default suites and
// absolute paths; b itself when it is not a YAML mapping.
func withTLSDefaults(b []byte, dir string) []byte {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return b
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "tls_server_config" || root.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		tlsCfg := root.Content[i+1]
		named := false
		for j := 0; j+1 < len(tlsCfg.Content); j += 2 {
			k, val := tlsCfg.Content[j].Value, tlsCfg.Content[j+1]
			if k == "cipher_suites" {
				named = true
			}
			if tlsPathKeys[k] && val.Kind == yaml.ScalarNode && val.Value != "" && !filepath.IsAbs(val.Value) {
				val.Value = filepath.Join(dir, val.Value)
			}
		}
		if !named {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for _, s := range DefaultCipherSuites {
				seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
			}
			tlsCfg.Content = append(tlsCfg.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "cipher_suites"}, seq)
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	if enc.Encode(&doc) != nil || enc.Close() != nil {
		return b
	}
	return out.Bytes()
}
