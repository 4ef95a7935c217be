package offsite_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/offsite/offsitetest"
)

var teamA = offsite.Object{Namespace: "team-a", Kind: captfv1.KindCluster, Name: "prod"}

func copyOf(o offsite.Object, serial int64, data []byte) offsite.Copy {
	sum := sha256.Sum256(data)
	return offsite.Copy{Object: o, Serial: serial, Lineage: "8f0c-lineage", Digest: hex.EncodeToString(sum[:]), Resources: 3,
		TakenAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), InputsHash: "abc"}
}

func TestUploadListDownload(t *testing.T) {
	srv := offsitetest.Start(t)
	st := srv.Store(t, "mgmt-1/captf")
	ctx := context.Background()

	data7, data8 := []byte("state seven, compressed"), []byte("state eight, compressed")
	c7, err := st.Upload(ctx, copyOf(teamA, 7, data7), data7)
	if err != nil {
		t.Fatal(err)
	}
	wantKey := "mgmt-1/captf/team-a/TerraformCluster/prod/7-" + c7.Digest + ".tfstate.gz"
	if c7.Key != wantKey || c7.Location != "s3://"+offsitetest.Bucket+"/"+wantKey {
		t.Fatalf("key %q location %q, want %q", c7.Key, c7.Location, wantKey)
	}
	if _, err := st.Upload(ctx, copyOf(teamA, 8, data8), data8); err != nil {
		t.Fatal(err)
	}
	// Uploading the same copy again is success, and writes nothing.
	if again, err := st.Upload(ctx, copyOf(teamA, 7, data7), data7); err != nil || again.Key != c7.Key {
		t.Fatalf("second upload: %v, %q", err, again.Key)
	}
	// Another object's copy and a stray object in the folder are not listed as teamA's.
	other := offsite.Object{Namespace: "team-b", Kind: captfv1.KindCluster, Name: "prod"}
	if _, err := st.Upload(ctx, copyOf(other, 9, data8), data8); err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "mgmt-1/captf/team-a/TerraformCluster/prod/notes.txt", nil, []byte("hello"))

	copies, skipped, err := st.List(ctx, teamA)
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) != 2 || copies[0].Serial != 8 || copies[1].Serial != 7 || skipped != 1 {
		t.Fatalf("listed %+v (skipped %d), want serials 8, 7 and one skipped", copies, skipped)
	}
	if c := copies[1]; c.Lineage != "8f0c-lineage" || c.Resources != 3 || c.InputsHash != "abc" || c.Bytes != int64(len(data7)) ||
		!c.TakenAt.Equal(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)) || c.Object != teamA {
		t.Fatalf("listed copy %+v lost its metadata", c)
	}

	got, data, err := st.Download(ctx, c7.Key)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(data7) || got.Serial != 7 || got.Digest != c7.Digest {
		t.Fatalf("downloaded %q %+v", data, got)
	}
	if _, _, err := st.Download(ctx, strings.Replace(c7.Key, "/7-", "/6-", 1)); !errors.Is(err, offsite.ErrNotFound) {
		t.Fatalf("download of a missing copy: %v, want ErrNotFound", err)
	}
}

func TestUploadRefusesDataOfAnotherDigest(t *testing.T) {
	st := offsitetest.Start(t).Store(t, "")
	c := copyOf(teamA, 7, []byte("what was backed up"))
	if _, err := st.Upload(context.Background(), c, []byte("something else")); !errors.Is(err, offsite.ErrIntegrity) {
		t.Fatalf("got %v, want ErrIntegrity", err)
	}
}

func TestUploadNeverOverwritesAnotherObject(t *testing.T) {
	srv := offsitetest.Start(t)
	st := srv.Store(t, "p")
	data := []byte("the real state")
	c := copyOf(teamA, 7, data)
	key := offsite.Key("p", teamA, 7, c.Digest)
	// Something else wrote under the key first: same serial and digest claimed, other bytes.
	planted := []byte("planted by someone else")
	srv.Put(t, key, map[string]string{"Captf-Format": "v1", "Captf-Serial": "7", "Captf-Lineage": "other", "Captf-Sha256": c.Digest}, planted)

	_, err := st.Upload(context.Background(), c, data)
	if !errors.Is(err, offsite.ErrCollision) {
		t.Fatalf("got %v, want ErrCollision", err)
	}
	obj, err := srv.Backend.GetObject(offsitetest.Bucket, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Contents.Close()
	buf := make([]byte, 100)
	n, _ := obj.Contents.Read(buf)
	if string(buf[:n]) != string(planted) {
		t.Fatalf("the object under the key was overwritten: %q", buf[:n])
	}
}

func TestDownloadRefusesAChecksumMismatch(t *testing.T) {
	srv := offsitetest.Start(t)
	st := srv.Store(t, "")
	c := copyOf(teamA, 7, []byte("the state"))
	key := offsite.Key("", teamA, 7, c.Digest)
	meta := map[string]string{"Captf-Format": "v1", "Captf-Serial": "7", "Captf-Lineage": "l", "Captf-Sha256": c.Digest}

	srv.Put(t, key, meta, []byte("the state, altered in the bucket"))
	if _, _, err := st.Download(context.Background(), key); !errors.Is(err, offsite.ErrIntegrity) {
		t.Fatalf("altered bytes: got %v, want ErrIntegrity", err)
	}

	// Metadata whose serial is not the key's.
	meta["Captf-Serial"] = "8"
	srv.Put(t, key, meta, []byte("the state"))
	if _, _, err := st.Download(context.Background(), key); !errors.Is(err, offsite.ErrIntegrity) {
		t.Fatalf("metadata of another serial: got %v, want ErrIntegrity", err)
	}
}

func TestBadCredentialIsAClearError(t *testing.T) {
	srv := offsitetest.Start(t)
	st, err := offsite.New(srv.Target(t, ""), offsite.Credentials{AccessKey: "wrong", SecretKey: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("x")
	_, err = st.Upload(context.Background(), copyOf(teamA, 1, data), data)
	if !errors.Is(err, offsite.ErrAccess) || !strings.Contains(err.Error(), "check the access key") {
		t.Fatalf("got %v, want ErrAccess saying what to check", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("the error shows the credential: %v", err)
	}
	if _, _, err := st.List(context.Background(), teamA); !errors.Is(err, offsite.ErrAccess) {
		t.Fatalf("list: got %v, want ErrAccess", err)
	}
	if _, err := offsite.New(srv.Target(t, ""), offsite.Credentials{AccessKey: "a"}); err == nil {
		t.Fatal("an empty secret key was accepted")
	}
}

func TestMissingBucketIsAClearError(t *testing.T) {
	srv := offsitetest.Start(t)
	tg := srv.Target(t, "")
	tg.Bucket = "no-such-bucket"
	st, err := offsite.New(tg, offsitetest.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("x")
	if _, err := st.Upload(context.Background(), copyOf(teamA, 1, data), data); err == nil || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("got %v, want the missing bucket named", err)
	}
}
