package producer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// badPIDBroker answers ApiVersions (InitProducerId v4 among them) and
// Metadata (itself as the only broker) as a broker does, and
// InitProducerId with an answer whose header claims a tagged field of
// 2^64-1 bytes, on ln, over TLS when cfg is set.
func badPIDBroker(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	host, portText, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portText)
	t.Cleanup(func() { _ = ln.Close() })
	serve := func(nc net.Conn) {
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		for {
			version, id, _, msg, err := protocol.ReadRequest(nc)
			if err != nil {
				return
			}
			var b bytes.Buffer
			switch msg.ApiKey() {
			case protocol.ApiVersions:
				_ = protocol.WriteResponse(&b, version, id, &apiversions.Response{ApiKeys: []apiversions.ApiKeyResponse{
					{ApiKey: int16(protocol.Metadata), MaxVersion: 12}, {ApiKey: int16(protocol.InitProducerId), MaxVersion: 4}}})
			case protocol.Metadata:
				_ = protocol.WriteResponse(&b, version, id, &metadata.Response{ControllerID: 0,
					Brokers: []metadata.ResponseBroker{{NodeID: 0, Host: host, Port: int32(port)}}})
			default:
				f := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(id))
				f = binary.AppendUvarint(f, 1)          // one tagged field in the header,
				f = binary.AppendUvarint(f, 0)          // tag 0,
				f = binary.AppendUvarint(f, 1<<64-1)    // of 2^64-1 bytes
				f = append(f, make([]byte, 4+2+8+2)...) // throttle, error, id, epoch
				f = binary.AppendUvarint(f, 0)
				binary.BigEndian.PutUint32(f, uint32(len(f)-4))
				b.Write(f)
			}
			if _, err := nc.Write(b.Bytes()); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(nc)
		}
	}()
	return ln.Addr().String()
}

// selfSigned returns a server and a client TLS configuration for
// 127.0.0.1.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// TestMalformedAnswerIsADisconnection: a malformed answer on a connection
// of kafka-go's Transport (metadata, producer ids, transactions,
// checkpoints), plaintext or over TLS, fails the request with an error
// saying so, which the writer takes for a disconnection (retried after
// asking for metadata), instead of crashing the process in the
// Transport's own goroutine.
func TestMalformedAnswerIsADisconnection(t *testing.T) {
	serverTLS, clientTLS := selfSigned(t)
	for _, tt := range []struct {
		name     string
		sec      Security
		listener *tls.Config
	}{
		{"plaintext", Security{}, nil},
		{"tls", Security{TLS: clientTLS}, serverTLS},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := badPIDBroker(t, tt.listener)
			client := tt.sec.Client([]string{addr})
			defer client.Transport.(*kafka.Transport).CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := client.Transport.RoundTrip(ctx, client.Addr, &initproducerid.Request{TransactionTimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1})
			if err == nil {
				t.Fatalf("the malformed answer was decoded: %+v", res)
			}
			if !strings.Contains(err.Error(), "malformed InitProducerId v4 answer") {
				t.Errorf("err = %v, want one saying the InitProducerId v4 answer was malformed", err)
			}
			if !disconnected(err) {
				t.Errorf("err = %v is not taken for a disconnection", err)
			}
		})
	}
}
