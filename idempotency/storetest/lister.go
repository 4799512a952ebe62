package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// RunLister runs the listing checks on a store that implements
// idempotency.Lister (an operator's page lists through it): every state
// lists exactly its live records, filtered by caller and key prefix, page
// after page with no record twice or missing; a page never exceeds its
// limit; bad queries and cursors get ErrInvalidList; and listing changes
// nothing.
// maxListPage is the largest page a Lister returns (ListQuery.Limit: 1 to
// 500).
const maxListPage = 500

func RunLister(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h Harness, l idempotency.Lister)
	}{
		{"ListByState", testListByState},
		{"ListFilters", testListFilters},
		{"ListPaging", testListPaging},
		{"ListInvalid", testListInvalid},
		{"ListPastScanWindow", testListPastScanWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			l, ok := h.Store.(idempotency.Lister)
			if !ok {
				t.Fatalf("storetest: %T does not implement idempotency.Lister", h.Store)
			}
			tc.run(t, h, l)
		})
	}
}

// listAll pages through q and returns "caller/key" of every record found,
// sorted, failing on a page over its limit or a record listed twice.
func listAll(t *testing.T, l idempotency.Lister, q idempotency.ListQuery) []string {
	t.Helper()
	var names []string
	seen := map[string]bool{}
	for range 10_000 {
		p, err := l.List(context.Background(), q)
		noErr(t, "List", err)
		if len(p.Records) > q.PageSize() {
			t.Fatalf("List with limit %d returned %d records", q.PageSize(), len(p.Records))
		}
		for _, r := range p.Records {
			n := r.Caller + "/" + r.Key
			if got := r.ListState(p.Now); got != q.State {
				t.Fatalf("List of %v returned %s, which is %v", q.State, n, got)
			}
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if p.Next == "" {
			slices.Sort(names)
			return names
		}
		q.Cursor = p.Next
	}
	t.Fatal("List never ended")
	return nil
}

// fillStates makes, for caller "c", records in every state: keys
// "run-N" in progress, "stall-N" stalled, "park-N" parked, "done-N"
// completed, n of each, and one expired record of each kind under caller
// "old".
func fillStates(t *testing.T, h Harness, n int) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []string{"old", "c"} {
		for i := range n {
			k := fmt.Sprint(i)
			claim(t, h.Store, claimReq(c, "stall-"+k, "fp"), idempotency.ClaimCreated)
			parkOne(t, h.Store, c, "park-"+k, "no work")
			d := claim(t, h.Store, claimReq(c, "done-"+k, "fp"), idempotency.ClaimCreated)
			noErr(t, "Complete", h.Store.Complete(ctx, fence(d), []byte("ok")))
		}
		if c == "old" {
			h.Advance(ttl + lease)
			continue
		}
		h.Advance(lease + 1e9)
		for i := range n {
			claim(t, h.Store, claimReq(c, fmt.Sprint("run-", i), "fp"), idempotency.ClaimCreated)
		}
	}
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint("c/", prefix, i))
	}
	slices.Sort(out)
	return out
}

// Every state lists exactly its live records; expired ones are never listed.
func testListByState(t *testing.T, h Harness, l idempotency.Lister) {
	for _, st := range []idempotency.ListState{idempotency.ListInProgress, idempotency.ListStalled, idempotency.ListParked, idempotency.ListCompleted} {
		if got := listAll(t, l, idempotency.ListQuery{State: st}); len(got) != 0 {
			t.Fatalf("an empty store lists %v: %q", st, got)
		}
	}
	before, err := l.Now(context.Background())
	noErr(t, "Now", err)
	fillStates(t, h, 3)
	after, err := l.Now(context.Background())
	noErr(t, "Now", err)
	if after.Sub(before) < ttl+2*lease {
		t.Fatalf("Now moved by %v while the harness advanced %v", after.Sub(before), ttl+2*lease)
	}
	for st, prefix := range map[idempotency.ListState]string{
		idempotency.ListInProgress: "run-", idempotency.ListStalled: "stall-",
		idempotency.ListParked: "park-", idempotency.ListCompleted: "done-",
	} {
		got := listAll(t, l, idempotency.ListQuery{State: st})
		if want := names(prefix, 3); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("List of %v found %q, want %q", st, got, want)
		}
	}
	// The records come whole.
	p, err := l.List(context.Background(), idempotency.ListQuery{State: idempotency.ListParked, KeyPrefix: "park-1"})
	noErr(t, "List", err)
	if len(p.Records) != 1 {
		t.Fatalf("List of park-1 returned %d records", len(p.Records))
	}
	if r := p.Records[0]; r.Parked != "no work" || r.Fingerprint != "fp" || r.RecoveryPoint != "begin:charge" || r.Attempt != 1 || r.Generation == 0 {
		t.Fatalf("List returned %+v", r)
	}
	// Listing changed nothing: a parked record is still parked.
	r, err := h.Store.Get(context.Background(), "c", "park-1")
	noErr(t, "Get", err)
	if r.Parked != "no work" {
		t.Fatalf("after List, park-1 is %+v", r)
	}
}

// Caller and key prefix filter; another caller's keys never show.
func testListFilters(t *testing.T, h Harness, l idempotency.Lister) {
	ctx := context.Background()
	for _, ck := range [][2]string{{"a", "order-1"}, {"a", "order-2"}, {"a", "refund-1"}, {"b", "order-3"}, {"ab", "order-4"}} {
		d := claim(t, h.Store, claimReq(ck[0], ck[1], "fp"), idempotency.ClaimCreated)
		noErr(t, "Complete", h.Store.Complete(ctx, fence(d), nil))
	}
	for _, tc := range []struct {
		caller, prefix string
		want           []string
	}{
		{"", "", []string{"a/order-1", "a/order-2", "a/refund-1", "ab/order-4", "b/order-3"}},
		{"a", "", []string{"a/order-1", "a/order-2", "a/refund-1"}},
		{"", "order-", []string{"a/order-1", "a/order-2", "ab/order-4", "b/order-3"}},
		{"a", "order-", []string{"a/order-1", "a/order-2"}},
		{"a", "order-2", []string{"a/order-2"}},
		{"b", "refund", nil},
		{"nobody", "", nil},
	} {
		for _, limit := range []int{0, 1, 2} {
			got := listAll(t, l, idempotency.ListQuery{State: idempotency.ListCompleted, Caller: tc.caller, KeyPrefix: tc.prefix, Limit: limit})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("List completed caller %q prefix %q limit %d found %q, want %q", tc.caller, tc.prefix, limit, got, tc.want)
			}
		}
	}
}

// Many records page through with every limit, each exactly once, and a
// page holds at most its limit.
func testListPaging(t *testing.T, h Harness, l idempotency.Lister) {
	ctx := context.Background()
	const n = 57
	for i := range n {
		d := claim(t, h.Store, claimReq("c", fmt.Sprintf("k%02d", i), "fp"), idempotency.ClaimCreated)
		noErr(t, "Complete", h.Store.Complete(ctx, fence(d), nil))
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("c/k%02d", i)
	}
	for _, limit := range []int{1, 7, 56, 57, 58, maxListPage} {
		got := listAll(t, l, idempotency.ListQuery{State: idempotency.ListCompleted, Limit: limit})
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("paging by %d found %d records %q", limit, len(got), got)
		}
	}
}

// Bad queries fail with ErrInvalidList and read nothing.
func testListInvalid(t *testing.T, _ Harness, l idempotency.Lister) {
	for _, q := range []idempotency.ListQuery{
		{},
		{State: idempotency.ListCompleted + 1},
		{State: idempotency.ListParked, Limit: -1},
		{State: idempotency.ListParked, Limit: maxListPage + 1},
		{State: idempotency.ListParked, Cursor: "not a cursor!"},
		{State: idempotency.ListParked, Cursor: "\x00\xff"},
	} {
		if _, err := l.List(context.Background(), q); !errors.Is(err, idempotency.ErrInvalidList) {
			t.Fatalf("List(%+v) = %v, want ErrInvalidList", q, err)
		}
	}
}

// More records than one page may read: a few parked among many completed
// are all found, page after page, each page within its limit.
func testListPastScanWindow(t *testing.T, h Harness, l idempotency.Lister) {
	ctx := context.Background()
	n := idempotency.ListQuery{}.ScanSize() + 40
	for i := range n {
		d := claim(t, h.Store, claimReq("c", fmt.Sprintf("done-%05d", i), "fp"), idempotency.ClaimCreated)
		noErr(t, "Complete", h.Store.Complete(ctx, fence(d), nil))
		if i%700 == 0 {
			parkOne(t, h.Store, "c", fmt.Sprintf("park-%05d", i), "stuck")
		}
	}
	got := listAll(t, l, idempotency.ListQuery{State: idempotency.ListParked, Limit: 2})
	want := []string{"c/park-00000", "c/park-00700", "c/park-01400"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List of parked among %d records found %q, want %q", n, got, want)
	}
	if got := listAll(t, l, idempotency.ListQuery{State: idempotency.ListCompleted, Limit: maxListPage}); len(got) != n {
		t.Fatalf("List of completed found %d records, want %d", len(got), n)
	}
}
