/*
 * The claim protocol of package idempotency and the consumer core, as a
 * Promela model for spin. README.md in this folder maps every process,
 * message and variable to the Go code it stands for.
 *
 * Actors: two consumers (idempotency/consumer: handle, settle, stopped,
 * inbox) over Runner.Do, one Reconciler, one store (a TxStore: the local
 * effect commits with the fenced Complete), one broker message with a
 * delivery limit, and a clock that moves leases to their end. Faults, from
 * one budget: a worker crashes at any step, a store call fails before or
 * after it applies (its reply lost), a handler fails, the broker redelivers
 * a delivery whose consumer paused past its ack wait. Pauses of any length
 * are the interleavings themselves: a worker that takes no step while the
 * clock ticks is paused.
 *
 * Each mutant (check.sh) is one -D macro: it changes one line of the
 * protocol (M8 also adds the index it leaves the record out of).
 */

#ifndef LEASE
#define LEASE 1 /* clock ticks a lease lasts */
#endif
#ifndef MAXD
#define MAXD 2 /* the broker's delivery limit (MaxDeliver) */
#endif
#ifndef FAULTS
#define FAULTS 2 /* crashes, lost replies, failed handlers and pauses, in all */
#endif
#ifndef MAXATT
#define MAXATT 2 /* ReconcilerConfig.MaxAttempts */
#endif
#ifndef STOPS
#define STOPS 1 /* graceful stops of a consumer, in all */
#endif

/* the argument of CLAIM: the started mark (Request.StartedAtClaim), and a
 * ghost bit saying the claim comes from the broker's last delivery */
#define MARK 1
#define LASTDELIVERY 2

#define NW 3 /* workers: consumers 0 and 1, the Reconciler 2 */
#define REC 2
#define NONE 255
#define MAXGEN 8

/* store operations (the Store interface) */
mtype = { CLAIM, COMPLETE, SAVE, RELEASE, PARK, GET, TAKEOVER };
/* replies */
mtype = { CREATED, TAKEN, INPROG, COMPLETED, OK, LOST, ERR, OWNED, NOTOWNED, NOTHING };


/* The record of the one key (Record). */
bool r_exists;
bool r_done;       /* State == StateCompleted */
byte r_gen;        /* Generation */
byte r_att;        /* Attempt */
byte r_rem;        /* LockedUntil - now, in ticks: the lease is held while > 0 */
bool r_point;      /* RecoveryPoint != "" (the started mark or a step) */
bool r_parked;     /* Parked != "" */
byte r_resp;       /* Response: the worker whose run produced it, plus 1 */
byte lastgen;      /* the store's generation counter */
#ifdef M8
bool r_tracked;    /* the record is in the store's index of started records */
#define TRACK r_tracked = true
#define TRACKED && r_tracked
#else
#define TRACK skip
#define TRACKED
#endif

/* The broker's one message. */
bool b_avail = true; /* waiting to be delivered */
bool b_gone;         /* acked, terminated or dropped: never delivered again */
byte b_count;        /* deliveries made */
byte b_holder = NONE;/* the consumer holding the current delivery */

byte faults = FAULTS;
byte stops = STOPS;

/* Clock readings of the workers, as ticks left. pend[w]: the lease end a
 * worker computed from the clock read before its claim or renewal, kept
 * until the store answers; dl[w]: the deadline of the Work's context (the
 * worker believes it holds the lease while > 0). */
byte pend[NW];
byte dl[NW];
/* ended[w]: a lease of the key ended (ran out, parked, cut) since worker w
 * read the clock for its claim. Only the mutant M6 reads it. */
bool ended[NW];

/* Ghosts, for the properties. */
byte holder = NONE;  /* the worker the store last gave the execution to */
bool running;        /* ... and it got the answer and is not done with it */
byte effects[MAXGEN];/* committed local effects per generation */
byte final_resp;     /* the first outcome stored (0: none yet) */
byte final_gen;
bool reached;           /* a claim of the last delivery reached the store */
bool lost_before_claim; /* the last delivery timed out before reaching the store */

/* The work of w returned: its context ends. */
#define WORK_RETURNED dl[w] = 0
/* w is done with the execution: it wrote what it had to, or died. */
#define FINISHED if :: holder == w -> running = false :: else fi

#define MINUS(x) if :: x > 0 -> x-- :: else fi

/* A lease of the key ended: whoever read the clock before sees it later
 * (kept only for M6, which reads it). */
#ifdef M6
#define LEASE_ENDED ended[0] = true; ended[1] = true; ended[2] = true
#define CLOCK_READ(w) pend[w] = LEASE; ended[w] = false
#else
#define LEASE_ENDED skip
#define CLOCK_READ(w) pend[w] = LEASE
#endif

/* The broker takes back the delivery it gave: redelivers the message, or
 * drops it once the delivery limit is reached. */
#define REDELIVER_OR_DROP \
	b_holder = NONE; \
	if \
	:: b_count < MAXD -> b_avail = true \
	:: else -> GONE \
	fi

/* The same when the consumer died or paused past the ack wait: a last
 * delivery that never reached the store is dropped (dead-lettered) with
 * nothing the consumer could do, the case README.md leaves out. */
#define TIMED_OUT \
	b_holder = NONE; \
	if \
	:: b_count < MAXD -> b_avail = true \
	:: else -> \
		if \
		:: reached -> GONE \
		:: else -> b_gone = true; lost_before_claim = true \
		fi \
	fi

/* P5: the message leaves the broker for good only once the store owns it:
 * completed, parked, or started (so that a Reconciler finishes it). */
#define GONE \
	if \
	:: !(r_exists && (r_done || r_parked || r_point)) -> \
		printf("PROPERTY P5 violated: the message left the broker and the store does not own it\n"); \
		assert(false) \
	:: else \
	fi; \
	b_gone = true; b_holder = NONE

/* P3: an outcome a worker returns is exactly the stored one. */
#define RETURNS(resp) \
	if \
	:: resp != final_resp || !r_done || r_resp != resp -> \
		printf("PROPERTY P3 violated: a worker returned an outcome that is not the stored one\n"); \
		assert(false) \
	:: else \
	fi

/* P7: when the store gives the execution to w, no other worker still
 * runs work believing it holds the lease. */
#define GRANT(w) \
	if \
	:: (w != 0 && dl[0] > 0) || (w != 1 && dl[1] > 0) || (w != 2 && dl[2] > 0) -> \
		printf("PROPERTY P7 violated: the lease was given to another while a worker still runs under it\n"); \
		assert(false) \
	:: else \
	fi; \
	holder = w; running = !lost

/* P1: at most one committed local effect per key and generation. */
#define EFFECT(g) \
	if \
	:: effects[g] > 0 -> \
		printf("PROPERTY P1 violated: a second local effect committed for one generation\n"); \
		assert(false) \
	:: else \
	fi; \
	effects[g]++

/* The store's fence: Caller, Key, Attempt, Generation, in progress. */
#ifdef M4
#define FENCED (r_exists && r_gen == g && !r_done)
#else
#define FENCED (r_exists && r_gen == g && r_att == a && !r_done)
#endif

/* A claim finds the lease held. */
#ifdef M6
#define HELD (r_rem > 0 || ended[w])
#else
#define HELD (r_rem > 0)
#endif

/* A claim may take the record over. */
#ifdef M2
#define TAKEABLE (!HELD)
#else
#define TAKEABLE (!r_done && !HELD)
#endif

/* The store: each operation is one atomic step (one statement, one Lua
 * script, one critical section) taken for the calling worker w, which may
 * fail before it applies or lose its reply (ERR). It sets the caller's
 * kind, rg, ra, rarg: the reply. */
inline store(op, g, a, arg)
{
	atomic {
		apply = true; lost = false;
		if
		:: faults > 0 -> faults--; apply = false
		:: faults > 0 -> faults--; lost = true
		:: true
		fi;
		rg = 0; ra = 0; rarg = 0; kind = ERR;
		if
		:: !apply -> skip
		:: apply && op == CLAIM ->
			if
			:: !r_exists ->
				lastgen++; assert(lastgen < MAXGEN);
				r_exists = true; r_done = false; r_gen = lastgen; r_att = 1;
				r_rem = LEASE; r_point = arg & MARK; r_parked = false; r_resp = 0;
#ifdef M8
				r_tracked = false; /* the mark is saved, but not indexed */
#endif
				GRANT(w); kind = CREATED
			:: r_exists && TAKEABLE ->
				r_att++; r_rem = LEASE; r_parked = false; r_done = false; r_resp = 0;
				if :: arg & MARK -> r_point = true :: else fi;
				TRACK;
				GRANT(w); kind = TAKEN
			:: r_exists && !TAKEABLE && r_done ->
				kind = COMPLETED; rarg = r_resp
			:: r_exists && !TAKEABLE && !r_done ->
				/* P6: a claim answers from the record as it stands. */
				if
				:: r_rem == 0 ->
					printf("PROPERTY P6 violated: a claim reported as held a lease that had ended\n");
					assert(false)
				:: else
				fi;
				/* A claim with the started mark saves it on a record
				 * held without one: the holder keeps the execution, the
				 * record now owns the message. */
#ifndef M5D
				if :: (arg & MARK) && !r_point -> r_point = true; TRACK :: else fi;
#endif
				kind = INPROG
			fi;
			/* The last delivery reached the store once any claim of it
			 * applied: it took the execution, found it settled, or saved
			 * the started mark on the record that holds it. */
			if :: arg & LASTDELIVERY -> reached = true :: else fi;
			rg = r_gen; ra = r_att; rarg = (kind == COMPLETED -> r_resp : r_point)
		:: apply && op == COMPLETE ->
			if
			:: FENCED ->
				if
				:: holder != w ->
					printf("PROPERTY P4 violated: a worker whose lease was taken over committed\n");
					assert(false)
				:: else
				fi;
				EFFECT(g);
				r_done = true; r_resp = arg;
				if :: final_resp == 0 -> final_resp = arg; final_gen = g :: else fi;
				kind = OK
			:: else ->
#ifdef M1
				EFFECT(g);
#endif
				kind = LOST
			fi
		:: apply && op == SAVE ->
			if
			:: FENCED -> r_rem = arg; TRACK; if :: arg == 0 -> LEASE_ENDED :: else fi; kind = OK
			:: else -> kind = LOST
			fi
		:: apply && op == RELEASE ->
			/* Store.ReleaseUnstarted: a record that got the started mark
			 * from another claim is kept, its lease ended, for a
			 * Reconciler. */
			if
			:: FENCED && !r_point -> r_exists = false; holder = NONE; kind = OK
			:: FENCED && r_point -> r_rem = 0; LEASE_ENDED; kind = OK
			:: else -> kind = LOST
			fi
		:: apply && op == PARK ->
			if
			:: FENCED -> r_parked = true; r_rem = 0; LEASE_ENDED; kind = OK
			:: else -> kind = LOST
			fi
		:: apply && op == GET ->
			kind = (r_exists && (r_done || r_parked || r_point) -> OWNED : NOTOWNED)
		:: apply && op == TAKEOVER ->
			if
			:: r_exists && !r_done && r_point && !r_parked && r_rem == 0 TRACKED ->
				r_att++; r_rem = LEASE; GRANT(w);
				kind = TAKEN; rg = r_gen; ra = r_att
			:: else -> kind = NOTHING
			fi
		fi;
		/* P2: a completed outcome is never changed. */
		if
		:: final_resp != 0 && !(r_exists && r_done && r_resp == final_resp && r_gen == final_gen) ->
			printf("PROPERTY P2 violated: a completed outcome changed\n");
			assert(false)
		:: else
		fi;
		if
		:: lost -> kind = ERR
		:: else
		fi
	}
}

/* The clock: every lease and every worker's reading move on together. */
active proctype clock()
{
end:
	do
	:: atomic {
		/* A lease runs out under a running execution only if it paused
		 * (or ran slow) that long: a fault. Executions eventually finish
		 * within their lease. */
		(r_rem > 0 || dl[0] > 0 || dl[1] > 0 || dl[2] > 0 || pend[0] > 0 || pend[1] > 0 || pend[2] > 0) &&
		!(r_rem == 1 && running && faults == 0) ->
		if
		:: r_rem == 1 && running -> faults--
		:: else
		fi;
		if :: r_rem == 1 -> LEASE_ENDED :: else fi;
		MINUS(r_rem);
		MINUS(dl[0]); MINUS(dl[1]); MINUS(dl[2]);
		MINUS(pend[0]); MINUS(pend[1]); MINUS(pend[2])
	   }
	:: atomic {
		/* a consumer paused past the broker's ack wait */
		faults > 0 && b_holder != NONE && !b_gone && !b_avail ->
		faults--; TIMED_OUT
	   }
	:: timeout -> skip /* nothing else can move: time goes on (a stuck run repeats its last state) */
	od
}

/* A crash at this step: the worker loses what it held in memory. */
#define CRASHPOINT if :: atomic { faults > 0 -> faults-- }; goto crashed :: true fi

/* A store call and its reply. */
#define CALL(op, g, a, arg) store(op, g, a, arg)

/* The delivery this consumer holds is still the broker's current one. */
#define MINE (b_holder == w && b_count == del && !b_gone)
#define ACK atomic { if :: MINE -> GONE :: else fi }
#define TERM ACK
/* Consumer.stopped gives back at once only what the broker delivers again. */
#ifdef M5A
#define GIVE_BACK true
#else
#define GIVE_BACK !last
#endif
#define NAK atomic { if :: MINE -> REDELIVER_OR_DROP :: else fi }

/* The lease deadline of the Work's context, once the store answered. */
#ifdef M7
#define DEADLINE dl[w] = LEASE; pend[w] = 0
#else
#define DEADLINE dl[w] = pend[w]; pend[w] = 0
#endif

/* Runner.abandon: free the key when nothing began, else cut the lease. */
#define ABANDON \
	if \
	:: !point -> CALL(RELEASE, g, a, 0) \
	:: point -> CALL(SAVE, g, a, 0) \
	fi

/* A consumer: Consumer.handle over Runner.Do, and Consumer.stopped. */
proctype consumer(byte w)
{
	byte del, g, a, rg, ra, rarg;
	bool last, point;
	mtype kind;
	bool apply, lost;
fetch:
end:
	atomic {
		b_avail && !b_gone -> b_avail = false; b_count++; del = b_count;
		last = (b_count == MAXD); b_holder = w
	}
again:
	CRASHPOINT;
	if
	:: stops > 0 -> stops--; goto stopped
	:: true
	fi;
	/* Runner.Do: read the clock, then claim. */
	atomic { CLOCK_READ(w) };
#ifdef M5C
	CALL(CLAIM, 0, 0, last * LASTDELIVERY);
#else
	CALL(CLAIM, 0, 0, last * (MARK + LASTDELIVERY)); /* Request.StartedAtClaim on the last delivery */
#endif
	CRASHPOINT;
	if
	:: kind == ERR -> pend[w] = 0; FINISHED; goto again /* store failed: hold, run again */
	:: kind == COMPLETED -> pend[w] = 0; RETURNS(rarg); ACK; FINISHED; goto fetch
	:: kind == INPROG ->
		pend[w] = 0;
		if
		:: last -> FINISHED; goto again /* hold the last delivery, run again */
		:: else -> NAK; FINISHED; goto fetch
		fi
	:: kind == CREATED || kind == TAKEN ->
		g = rg; a = ra; point = rarg; DEADLINE
	fi;
#ifdef M5B
	ACK;
#endif
	CRASHPOINT;
	/* The work runs; it may renew its lease (Execution.Extend). */
	if
	::  atomic { pend[w] = LEASE }; CALL(SAVE, g, a, LEASE);
		if
		:: kind == OK -> dl[w] = pend[w]
		:: else
		fi;
		pend[w] = 0;
		CRASHPOINT
	:: true
	fi;
	if
	:: atomic { faults > 0 -> faults--; WORK_RETURNED }; /* the handler failed */
		CRASHPOINT;
		if
		:: last -> CALL(PARK, g, a, 0); /* idempotency.Park: the last delivery */
			CRASHPOINT;
			if
			:: kind == OK -> TERM; FINISHED; goto fetch
			:: else -> ABANDON; CRASHPOINT; FINISHED; goto again
			fi
		:: else -> ABANDON; CRASHPOINT; NAK; FINISHED; goto fetch
		fi
	:: true -> WORK_RETURNED; /* the handler succeeded: Tx.Complete */
		CALL(COMPLETE, g, a, w + 1);
		CRASHPOINT;
		if
#ifdef M3
		:: kind == OK || kind == ERR -> RETURNS(w + 1); ACK; FINISHED; goto fetch
#else
		:: kind == OK -> RETURNS(w + 1); ACK; FINISHED; goto fetch
		:: kind == ERR -> ABANDON; CRASHPOINT; FINISHED; goto again
#endif
		:: kind == LOST ->
			if
			:: last -> FINISHED; goto again
			:: else -> NAK; FINISHED; goto fetch
			fi
		fi
	fi;

stopped: /* Consumer.stopped: give back, or hand the last delivery to the store */
	if
	:: GIVE_BACK -> NAK; FINISHED; goto fetch
	:: else
	fi;
inbox:
	CRASHPOINT;
	atomic { CLOCK_READ(w) };
	CALL(CLAIM, 0, 0, MARK + LASTDELIVERY);
	CRASHPOINT;
	if
	:: kind == CREATED || kind == TAKEN ->
		g = rg; a = ra; point = true; DEADLINE; WORK_RETURNED; /* the work parks at once */
		CALL(PARK, g, a, 0);
		CRASHPOINT;
		if
		:: kind == OK -> ACK; FINISHED; goto fetch
		:: else -> ABANDON; FINISHED; goto inbox
		fi
	:: kind == COMPLETED -> pend[w] = 0; ACK; FINISHED; goto fetch
	:: kind == INPROG -> pend[w] = 0;
		CALL(GET, 0, 0, 0);
		CRASHPOINT;
		if
		:: kind == OWNED -> ACK; FINISHED; goto fetch
		:: else -> FINISHED; goto inbox
		fi
	:: kind == ERR -> pend[w] = 0; FINISHED; goto inbox
	fi;

crashed: /* the process died; the broker redelivers what it held after its ack wait */
	atomic {
		pend[w] = 0; WORK_RETURNED; FINISHED;
		if :: MINE -> TIMED_OUT :: else fi
	}
	FINISHED; goto fetch
}

/* The Reconciler: TakeOverStalled, then resume or park (Runner.reconcile). */
active proctype reconciler()
{
	byte w = REC;
	byte g, a, rg, ra, rarg;
	bool point = true;
	mtype kind;
	bool apply, lost;
idle:
end:
	/* A pass that would find nothing changes nothing: wait for a stalled record. */
	atomic {
		r_exists && !r_done && r_point && !r_parked && r_rem == 0 TRACKED ->
		pend[w] = LEASE
	}
	CALL(TAKEOVER, 0, 0, 0);
	if
	:: kind != TAKEN -> pend[w] = 0; FINISHED; goto idle
	:: else -> g = rg; a = ra; DEADLINE
	fi;
	CRASHPOINT;
	if
	:: a > MAXATT -> WORK_RETURNED; CALL(PARK, g, a, 0); FINISHED; goto idle
	:: else
	fi;
	if
	:: atomic { faults > 0 -> faults--; WORK_RETURNED }; /* the resumed work failed */
		CRASHPOINT;
		ABANDON;
		FINISHED; goto idle
	:: true -> WORK_RETURNED;
		CALL(COMPLETE, g, a, w + 1);
		FINISHED; goto idle
	fi;
crashed:
	atomic {
		pend[w] = 0; WORK_RETURNED; FINISHED;
	}
	FINISHED; goto idle
}

init {
	atomic { run consumer(0); run consumer(1) }
}

/* P8: under weak fairness the message leaves the broker and its key ends
 * completed or parked, for good (no stuck key); unless the broker dropped
 * its last delivery before any claim of it reached the store (left out). */
ltl settled { <> [] (b_gone && (lost_before_claim || (r_exists && (r_done || r_parked)))) }
