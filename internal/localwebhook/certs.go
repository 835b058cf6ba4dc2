// Package localwebhook runs the litepool-webhook binary as a local process that the API
// server calls over HTTPS by URL: a self-signed CA and a serving certificate for
// 127.0.0.1, the process on free loopback ports, a readiness wait, and deploy/webhook's
// own webhook configurations registered with their client config pointed at it.
//
// The e2e tests and the benches use it in-process; hack/localwebhook uses it to run the webhook
// in the background for `make demo`. Nothing here depends on package testing: every
// function returns its error.
package localwebhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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

// Certs is a CA and a serving certificate for 127.0.0.1 and localhost, written as
// tls.crt, tls.key and ca.crt in Dir: what the webhook serves with --cert-mode=files.
type Certs struct {
	Dir   string
	CAPEM []byte
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// FirstSerial is the serial number of the serving certificate NewCerts issues.
const FirstSerial = 100

// NewCerts makes a fresh CA and issues a serving certificate (serial FirstSerial) into
// dir, which is created if needed.
func NewCerts(dir string) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "litepool-local-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &Certs{Dir: dir, ca: ca, caKey: key, CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if err := c.write("ca.crt", c.CAPEM); err != nil {
		return nil, err
	}
	return c, c.Issue(FirstSerial)
}

// Issue writes a fresh serving certificate with the given serial number, signed by the
// CA, the way a rotation would.
func (c *Certs) Issue(serial int64) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := c.write("tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})); err != nil {
		return err
	}
	return c.write("tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// write replaces a file by write-then-rename, so the webhook's certificate watcher never
// reads half a file.
func (c *Certs) write(name string, data []byte) error {
	tmp := filepath.Join(c.Dir, "."+name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, name))
}

// ServedSerial is the serial number of the certificate served at addr, verified
// against the CA.
func (c *Certs) ServedSerial(addr string) (int64, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return 0, fmt.Errorf("TLS to %s: %w", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}
