package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what the API server is started with: its serving certificate,
// signed by a CA that clients trust, and the service-account key pair that
// signs the tokens of the TokenRequest API.
type pki struct {
	caFile, certFile, keyFile string
	saPublicFile, saKeyFile   string
}

// writePKI writes a fresh CA and serving certificate for the loopback
// address, and the service-account key pair (saKey, or a new one), into dir.
func writePKI(dir string, saKey crypto.Signer) (pki, error) {
	p := pki{
		caFile: filepath.Join(dir, "ca.crt"), certFile: filepath.Join(dir, "apiserver.crt"), keyFile: filepath.Join(dir, "apiserver.key"),
		saPublicFile: filepath.Join(dir, "sa.pub"), saKeyFile: filepath.Join(dir, "sa.key"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpuscope-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return p, fmt.Errorf("CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	// The names a pod uses for the API server, and the loopback address the
	// tests reach it on.
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, srvKey.Public(), caKey)
	if err != nil {
		return p, fmt.Errorf("serving certificate: %w", err)
	}
	if saKey == nil {
		if saKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return p, err
		}
	}
	for _, f := range []struct {
		path, typ string
		der       func() ([]byte, error)
	}{
		{p.caFile, "CERTIFICATE", func() ([]byte, error) { return caDER, nil }},
		{p.certFile, "CERTIFICATE", func() ([]byte, error) { return srvDER, nil }},
		{p.keyFile, "PRIVATE KEY", func() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(srvKey) }},
		{p.saKeyFile, "PRIVATE KEY", func() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(saKey) }},
		{p.saPublicFile, "PUBLIC KEY", func() ([]byte, error) { return x509.MarshalPKIXPublicKey(saKey.Public()) }},
	} {
		der, err := f.der()
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.path, err)
		}
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: der}), 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}
