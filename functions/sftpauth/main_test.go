package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/sftpauthwire"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The function as Lambda runs it: Transfer Family's event JSON in, the
// identity provider's response JSON out, wired from the template's
// environment against the local stack's tables.
func TestTransferFamilyEventsAndResponses(t *testing.T) {
	s := testenv.Stack(t)
	env, err := s.Resources.Env("SftpAuthFunction")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, err := sftpauthwire.SFTPAuth(context.Background(), func(k string) string { return env[k] }, wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	handler := lambda.NewHandler(a.Authenticate)
	bucket := env["BATCH_BUCKET"]
	if bucket == "" || bucket != s.Resources.Buckets["BatchBucket"] || env["SFTP_USER_ROLE_ARN"] == "" {
		t.Fatalf("environment: BATCH_BUCKET=%q (bucket %q), SFTP_USER_ROLE_ARN=%q", bucket, s.Resources.Buckets["BatchBucket"], env["SFTP_USER_ROLE_ARN"])
	}

	// A merchant with a password and a key, and one with a key only.
	ctx := context.Background()
	both, keyOnly := testenv.NewMerchant(t), testenv.NewMerchant(t)
	hash, _ := sftpauth.HashPassword("correct horse battery")
	if err := s.Store.SetSFTPPassword(ctx, both.ID, dynamo.SFTPUsername(both.ID), hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	sshPub, _ := ssh.NewPublicKey(pub)
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " ops@laptop"
	for _, m := range []testenv.Merchant{both, keyOnly} {
		if err := s.Store.AddSFTPKey(ctx, m.ID, dynamo.SFTPUsername(m.ID), key, time.Now()); err != nil {
			t.Fatal(err)
		}
	}

	invoke := func(t *testing.T, user, password, protocol string) map[string]any {
		t.Helper()
		ev := map[string]string{"username": user, "protocol": protocol, "serverId": "s-0123456789abcdef0", "sourceIp": "198.51.100.7"}
		if password != "" {
			ev["password"] = password
		}
		in, _ := json.Marshal(ev)
		out, err := handler.Invoke(ctx, in)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		var resp map[string]any
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response is not a JSON object: %s", out)
		}
		return resp
	}
	checkHome := func(t *testing.T, resp map[string]any, merchantID string) {
		t.Helper()
		if resp["Role"] != env["SFTP_USER_ROLE_ARN"] || resp["HomeDirectoryType"] != "LOGICAL" {
			t.Errorf("role/home type: %v", resp)
		}
		details, ok := resp["HomeDirectoryDetails"].(string)
		if !ok {
			t.Fatalf("HomeDirectoryDetails must be a JSON document in a string: %v", resp["HomeDirectoryDetails"])
		}
		var maps []map[string]string
		if err := json.Unmarshal([]byte(details), &maps); err != nil {
			t.Fatal(err)
		}
		want := []map[string]string{
			{"Entry": "/incoming", "Target": "/" + bucket + "/incoming/" + merchantID},
			{"Entry": "/results", "Target": "/" + bucket + "/results/" + merchantID},
		}
		if !reflect.DeepEqual(maps, want) {
			t.Errorf("mappings %v, want %v", maps, want)
		}
		policy, _ := resp["Policy"].(string)
		var doc struct {
			Statement []struct {
				Action    []string
				Resource  []string
				Condition map[string]map[string][]string
			}
		}
		if err := json.Unmarshal([]byte(policy), &doc); err != nil {
			t.Fatalf("Policy is not a JSON policy: %q", policy)
		}
		arn := "arn:aws:s3:::" + bucket
		for _, st := range doc.Statement {
			for _, r := range st.Resource {
				if strings.HasPrefix(r, arn+"/") && !strings.HasPrefix(r, arn+"/incoming/"+merchantID+"/") && !strings.HasPrefix(r, arn+"/results/"+merchantID+"/") {
					t.Errorf("session policy reaches beyond the merchant's prefixes: %s", r)
				}
				if strings.Contains(strings.Join(st.Action, ","), "s3:DeleteObject") && !strings.HasPrefix(r, arn+"/results/") {
					t.Errorf("session policy lets the merchant delete %s", r)
				}
			}
			if p := st.Condition["StringLike"]["s3:prefix"]; p != nil && !reflect.DeepEqual(p, []string{"incoming/" + merchantID,
				"incoming/" + merchantID + "/*", "results/" + merchantID, "results/" + merchantID + "/*"}) {
				t.Errorf("listing condition %v", p)
			}
		}
	}

	t.Run("password", func(t *testing.T) {
		resp := invoke(t, both.ID, "correct horse battery", "SFTP")
		checkHome(t, resp, both.ID)
		if _, ok := resp["PublicKeys"]; ok {
			t.Errorf("PublicKeys in a password login: %v", resp)
		}
	})
	t.Run("key", func(t *testing.T) {
		for _, m := range []testenv.Merchant{both, keyOnly} {
			resp := invoke(t, m.ID, "", "SFTP")
			checkHome(t, resp, m.ID)
			if keys, _ := resp["PublicKeys"].([]any); len(keys) != 1 || keys[0] != key {
				t.Errorf("PublicKeys %v, want [%s]", resp["PublicKeys"], key)
			}
		}
	})
	for name, c := range map[string]struct{ user, password, protocol string }{
		"wrong password":              {both.ID, "Correct horse battery", "SFTP"},
		"unknown user":                {"mer_doesnotexist00", "correct horse battery", "SFTP"},
		"password of a key-only user": {keyOnly.ID, "correct horse battery", "SFTP"},
		"FTP":                         {both.ID, "correct horse battery", "FTP"},
		"invalid user name":           {"../etc", "x", "SFTP"},
	} {
		t.Run("deny/"+name, func(t *testing.T) {
			if resp := invoke(t, c.user, c.password, c.protocol); len(resp) != 0 {
				t.Errorf("denied login answered %v, want {}", resp)
			}
		})
	}
}
