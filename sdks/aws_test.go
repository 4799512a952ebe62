package sdks_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var awsCreds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}

// verifySigV4 signs again, with the same credentials and time, a copy of r
// that has only the headers r says it signed, and compares signatures: a
// resend of ours that changed what the SDK signed fails here.
func verifySigV4(service string) func(r *http.Request) error {
	return func(r *http.Request) error {
		auth := r.Header.Get("Authorization")
		_, signed, ok := strings.Cut(auth, "SignedHeaders=")
		if !ok {
			return fmt.Errorf("no SigV4 signature: %q", auth)
		}
		signed, _, _ = strings.Cut(signed, ",")
		at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		hash := r.Header.Get("X-Amz-Content-Sha256")
		if hash == "" {
			sum := sha256.Sum256(body)
			hash = hex.EncodeToString(sum[:])
		}
		c, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
		c.ContentLength = r.ContentLength
		for _, h := range strings.Split(signed, ";") {
			if h != "host" && h != "content-length" {
				c.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		err = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = service == "s3" }).
			SignHTTP(context.Background(), awsCreds, c, hash, service, "us-east-1", at)
		if err != nil {
			return err
		}
		if got := c.Header.Get("Authorization"); got != auth {
			return fmt.Errorf("signature differs:\n got %s\nwant %s", auth, got)
		}
		return nil
	}
}

// recordedDelays wraps an AWS retryer: it records the waits the SDK's
// backoff chose and sleeps none of them.
type recordedDelays struct {
	aws.RetryerV2
	total *time.Duration
}

func (r recordedDelays) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, err := r.RetryerV2.RetryDelay(attempt, err)
	*r.total += d
	return 0, err
}

// awsConfig is the SDK's configuration for stack s: its default retryer
// (or none), its waits recorded instead of slept.
func awsConfig(s stack, hc *http.Client, waited *time.Duration) (aws.Config, func(*aws.Retryer)) {
	cfg := aws.Config{Region: "us-east-1", HTTPClient: hc,
		Credentials: credentials.StaticCredentialsProvider{Value: awsCreds}}
	return cfg, func(r *aws.Retryer) {
		if s == offOverOur {
			*r = aws.NopRetryer{}
			return
		}
		*r = recordedDelays{RetryerV2: (*r).(aws.RetryerV2), total: waited}
	}
}

func s3API(t *testing.T, f *fake) *httptest.Server {
	f.check = verifySigV4("s3")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.serve(w, r, func() []byte { return nil }, func(status int) (string, string) {
			code := map[int]string{503: "SlowDown", 429: "SlowDown", 409: "OperationAborted"}[status]
			return "application/xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>fault</Message></Error>`, code)
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func dynamoAPI(t *testing.T, f *fake) *httptest.Server {
	f.check = verifySigV4("dynamodb")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, func() []byte { return []byte(`{}`) }, func(status int) (string, string) {
			code := map[int]string{503: "ServiceUnavailable", 429: "ThrottlingException", 409: "TransactionConflictException"}[status]
			return "application/x-amz-json-1.0", fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"fault"}`, code)
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runS3(t *testing.T, s stack, f *fake) (result, *layers) {
	srv := s3API(t, f)
	l, hc := newLayers(t, s)
	var waited time.Duration
	cfg, retryer := awsConfig(s, hc, &waited)
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(srv.URL), true
		retryer(&o.Retryer)
	})
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"),
		Body: bytes.NewReader([]byte("hello"))})
	return l.result(f, waited, err), l
}

func runDynamo(t *testing.T, s stack, f *fake) (result, *layers) {
	srv := dynamoAPI(t, f)
	l, hc := newLayers(t, s)
	var waited time.Duration
	cfg, retryer := awsConfig(s, hc, &waited)
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		retryer(&o.Retryer)
	})
	_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"),
		Item: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "1"}}})
	return l.result(f, waited, err), l
}

func TestAWSUnderOurTransport(t *testing.T) {
	for _, sdk := range []struct {
		name string
		run  func(*testing.T, stack, *fake) (result, *layers)
	}{{"aws-sdk-go-v2 S3 PutObject", runS3}, {"aws-sdk-go-v2 DynamoDB PutItem", runDynamo}} {
		for _, flt := range []fault{f503, f429, f409, resetBefore, resetAfter} {
			t.Run(sdk.name+"/"+string(flt), func(t *testing.T) {
				t.Parallel()
				var res [3]result
				for _, s := range []stack{alone, overOurs, offOverOur} {
					f := newFake(flt)
					r, l := sdk.run(t, s, f)
					res[s] = r
					record(t, sdk.name, flt, s, r)
					require.Error(t, r.err)
					assert.Empty(t, f.bad, "SigV4 valid on every attempt")
					if s == overOurs {
						for _, h := range l.sent {
							assert.NotEmpty(t, h.Get("Amz-Sdk-Request"))
						}
					}
				}
				assert.LessOrEqual(t, res[overOurs].attempts, max(res[alone].attempts, res[offOverOur].attempts),
					"no more attempts than the larger layer alone")
				if sdk.name[15] == 'D' { // a POST: our layer adds no effect
					assert.LessOrEqual(t, res[overOurs].duplicates, res[alone].duplicates)
				}
				assert.LessOrEqual(t, res[overOurs].waits, 1, "no more time than the SDK's own waits and one of ours")
				assert.LessOrEqual(t, res[overOurs].sdk, res[alone].sdk, "the SDK's own attempts as alone")
			})
		}
	}
}

// One fault, then success: SigV4 still valid on our resends, the object
// written, the item put.
func TestAWSThroughTransientFaults(t *testing.T) {
	for _, flt := range []fault{f503, resetBefore, resetAfter} {
		for _, s := range []stack{alone, overOurs, offOverOur} {
			t.Run(fmt.Sprint(flt, "/", s), func(t *testing.T) {
				for name, run := range map[string]func(*testing.T, stack, *fake) (result, *layers){
					"aws-sdk-go-v2 S3 PutObject (one fault)": runS3, "aws-sdk-go-v2 DynamoDB PutItem (one fault)": runDynamo} {
					f := newFake(pass, flt)
					r, _ := run(t, s, f)
					record(t, name, flt, s, r)
					assert.Empty(t, f.bad, "SigV4 valid on every attempt")
					if s != offOverOur || name[15] == 'S' {
						assert.NoError(t, r.err)
					}
				}
			})
		}
	}
}
