package toolkitlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func jsonLogger(lvl logrus.Level) (*logrus.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.JSONFormatter{})
	l.SetLevel(lvl)
	return l, &buf
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON line: %q", line)
		out = append(out, m)
	}
	return out
}

// exporter-toolkit logs like this (web/tls_config.go).
func TestRecordsBecomeLogrusEntries(t *testing.T) {
	l, buf := jsonLogger(logrus.InfoLevel)
	log := Logger(logrus.NewEntry(l).WithField("component", "web"))
	log.Info("Listening on", "address", "127.0.0.1:9400")
	log.Error("serve failed", "err", errors.New("boom"), "port", 9400, "http2", false, "wait", 2*time.Second)
	got := lines(t, buf)
	require.Len(t, got, 2)
	assert.Equal(t, map[string]any{"level": "info", "msg": "Listening on", "address": "127.0.0.1:9400", "component": "web", "time": got[0]["time"]}, got[0])
	assert.Equal(t, "error", got[1]["level"])
	assert.Equal(t, "boom", got[1]["err"], "an error is written as its text")
	assert.Equal(t, 9400.0, got[1]["port"])
	assert.Equal(t, false, got[1]["http2"])
	assert.Equal(t, "2s", got[1]["wait"])
}

func TestLevelsFollowTheLogrusLogger(t *testing.T) {
	tests := []struct {
		logrusLevel logrus.Level
		want        []string
	}{
		{logrus.DebugLevel, []string{"debug", "info", "warning", "error"}},
		{logrus.InfoLevel, []string{"info", "warning", "error"}},
		{logrus.WarnLevel, []string{"warning", "error"}},
		{logrus.ErrorLevel, []string{"error"}},
	}
	for _, tt := range tests {
		t.Run(tt.logrusLevel.String(), func(t *testing.T) {
			l, buf := jsonLogger(tt.logrusLevel)
			log := Logger(logrus.NewEntry(l))
			log.Debug("d")
			log.Info("i")
			log.Warn("w")
			log.Error("e")
			log.Log(t.Context(), slog.LevelError+4, "above error")
			var levels []string
			for _, m := range lines(t, buf) {
				levels = append(levels, m["level"].(string))
			}
			assert.Equal(t, append(tt.want, "error"), levels, "filtered by the logrus level; above Error is Error")
			assert.Equal(t, tt.logrusLevel >= logrus.DebugLevel, log.Enabled(t.Context(), slog.LevelDebug))
		})
	}
}

func TestGroupsAndAttrsFlatten(t *testing.T) {
	l, buf := jsonLogger(logrus.InfoLevel)
	log := Logger(logrus.NewEntry(l)).With("server", "web").WithGroup("tls").With("version", "1.3")
	log.Info("handshake", slog.Group("peer", "addr", "10.0.0.1"), "", "dropped", slog.Group("empty"))
	got := lines(t, buf)
	require.Len(t, got, 1)
	assert.Equal(t, "web", got[0]["server"])
	assert.Equal(t, "1.3", got[0]["tls.version"])
	assert.Equal(t, "10.0.0.1", got[0]["tls.peer.addr"])
	assert.NotContains(t, got[0], "tls.", "an attribute without a key is dropped")
	assert.NotContains(t, got[0], "tls.empty")
}

func TestTextFormatIsLogrusText(t *testing.T) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	Logger(logrus.NewEntry(l)).Info("TLS is disabled.", "http2", false)
	assert.Equal(t, "level=info msg=\"TLS is disabled.\" http2=false\n", buf.String())
}
