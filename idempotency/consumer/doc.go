// Package consumer is the broker-agnostic core of a message consumer whose
// effect happens exactly once although its broker delivers at least once:
// the same message twice, and a crash between "did it" and "wrote it
// down". The broker adapters (the modules natsconsumer, for NATS
// JetStream, and amqpconsumer, for RabbitMQ) map their client's
// deliveries onto it; the exactly-once part is idempotency.Runner's,
// never a second claim protocol.
//
// # One delivery
//
// The key is the message's id (Message.Key, chosen by the adapter), scoped
// by the consumer's caller (Config.Caller, default its Name). The Handler
// runs inside Runner.Do, so steps, downstream keys, a TxStore's
// transaction (pgstore.TxFrom) and the Reconciler all apply. What becomes
// of the delivery:
//
//   - the handler returned nil: its outcome is stored, then the delivery
//     is acked (never before);
//   - the key completed before (a duplicate): acked without running;
//   - another execution holds the key (a duplicate delivered at the same
//     time, or a consumer that died holding it): redelivered after the
//     hint of the *idempotency.InProgressError, not run;
//   - the handler failed transiently: redelivered after a full-jitter
//     backoff over the delivery count (Config.Backoff);
//   - the handler failed for good (retry.Permanent, idempotency.Park), or
//     failed on the delivery that reached Config.MaxDeliveries (or the
//     broker's last one): the execution is parked with
//     its reason (idempotency.Park; ListParked, RetryParked) and the
//     message terminated (dead-lettered where the broker has that);
//   - the handler rejected the message (idempotency.Reject), or its id
//     came with another body (idempotency.ErrFingerprintMismatch):
//     terminated (dead-lettered), nothing stored;
//   - a statement of the handler's transaction failed for good (the
//     store marks it retry.Permanent: a constraint the write
//     breaks, say): parked with the reason, as above, then terminated;
//   - its dependency is down (see below), or the store failed (a claim, a
//     commit, or a statement of the handler's transaction that failed for
//     a reason a retry may get past, as a reset connection): held, not
//     given back, and run again when it may succeed.
//
// While the handler runs, the delivery is kept alive at the broker
// (Delivery.InProgress, every Config.KeepAlive) together with the
// execution's lease (idempotency.Execution.Extend, every third of the
// Runner's lease), so a slow handler is neither redelivered elsewhere nor
// taken over.
//
// # Batches
//
// On a Runner whose store is an idempotency.BatchStore (pgstore,
// mysqlstore, redisstore, idempotency.MemoryBatchStore), the durable work
// of the deliveries taken together is done together, as Kafka's
// transactions do it: the deliveries that arrive while the claims of
// others are on their way to the store form a batch, whose keys are
// claimed in one store operation (Runner.StartBatch); each runs on its own
// goroutine as above; their outcomes are stored in one commit once every
// delivery of the batch ran, or Config.BatchWait after the first outcome
// was ready if some handler runs long (the rest then follow in a commit of
// their own); each delivery is acked after the commit that stored its
// outcome. A delivery taken while no claim is on its way is claimed at
// once, alone, so at low load nothing waits for a batch to fill or for a
// timer. On PostgreSQL each execution's local writes (pgstore.TxFrom) are
// made in a savepoint of its own inside the batch's transaction, so a
// failure rolls back only its own writes; mysqlstore keeps an execution
// that writes locally in a transaction of its own. Everything that does
// not simply complete in its batch (a duplicate in progress, a failed
// handler, a lost lease, a failed commit) goes on one delivery at a time
// as described above, and a consumer that dies between a batch's commit
// and its acks has the redeliveries replayed from the store, never run
// again.
//
// # Delivery limits
//
// The consumer counts a message's deliveries (Message.Delivery, the
// broker's count) and parks the message when the one that reaches
// Config.MaxDeliveries fails: poison is parked with its reason, never
// cycled for ever. Give the broker no delivery limit of its own
// (JetStream's MaxDeliver unset, a quorum queue's x-delivery-limit -1, or
// none before RabbitMQ 4): a broker's limit drops or dead-letters a
// message whose last delivery was taken by a consumer that died before
// its claim reached the store, and nothing can finish a message that no
// broker delivers and no store holds. Without one, a message whose
// consumer died is delivered again, whatever the moment of the death.
//
// A broker limit kept all the same is respected: the broker's last
// delivery (Delivery.Last) is never given back, since the broker would
// drop it or dead-letter it without its reason: it is held and run again
// here, or parked. The store owns it before the handler runs (an inbox):
// the claim stores the message with its execution and, in the same store
// operation, marks the execution started
// (idempotency.Request.StartedAtClaim), so that if the consumer dies at
// any moment after the claim (right after it, mid-handler, or after the
// effect before the outcome), the consumer's Reconciler finishes the
// execution from the stored message. A store failure making the claim
// holds the delivery, without running the handler. Only a death between
// the broker's last delivery and its claim loses the message.
//
// # The consumer's own Reconciler
//
// Run runs a Reconciler of its own (Runner.Reconcile, scoped to the
// consumer's caller, every Config.ReconcileInterval, skipped while a
// dependency is down): nothing beside the consumer needs starting. It
// finishes the executions of the consumer's caller that stalled (their
// lease ran out): the broker's last deliveries of a consumer that died or
// stopped, and any execution whose consumer died after a step began. A
// stalled execution waits out its lease (DefaultLease, or the Runner's if
// shorter: the consumer claims with it and renews it every third of it
// while the handler runs) and then at most one interval. A resumed run that fails
// permanently parks the message; one that fails otherwise is tried again
// on a later pass (a record's attempt count says nothing here: the
// consumer's own runs of a held delivery count too). Any number of
// consumers of one caller may run at once: the store gives each stalled
// execution to one of them.
//
// # Stopping
//
// When Run stops (its context ended, its Source failed), it fetches no
// more and settles at once the deliveries it holds between runs (through
// an outage, on a store failure, for a backoff): those the broker will
// deliver again are given back (Nak), and its last ones are handed to the
// store: claimed with the message and marked started, their lease cut
// short, then acked (never given back, never parked). The Reconciler of
// the next consumer to run (another instance, or this one restarted)
// finishes them within one ReconcileInterval: a rolling restart needs no
// operator. Run then waits up to Config.StopGrace (default
// DefaultStopGrace) for the handlers that run, and settles their
// deliveries the same way. A handler still running when the grace period
// ends goes on without Run, its lease renewed until it returns; if the
// process exits meanwhile, its delivery comes back from the broker, or,
// on a last delivery, from the store through a Reconciler. A last
// delivery the store cannot take within the grace period (the store is
// down) is terminated, with the reason logged. A stop so takes as long as
// the slowest running handler, at most Config.StopGrace and the moment it
// takes to settle what the consumer holds. A service stops its consumer
// by cancelling Run's context on SIGTERM (signal.NotifyContext).
//
// # Outages
//
// A consumer whose handler's dependency is down must not cycle every
// message through the broker's delivery limit into the dead-letter
// queue. The consumer takes the dependency to be down while a Budget in
// Config.DependsOn says so (retry.Budget.DependencyStats, which retry.Do
// keeps with retry.WithBudget), while Config.Down reports true, or after
// the handler reported it (an error matching retry.ErrDependencyDown, as
// retry.Do returns when its wait for the dependency ended) until a
// handler next succeeds. Meanwhile it fetches nothing new (one message now
// and then, when nothing else runs, so that the handler's retry loop can
// probe), holds the deliveries that failed (kept alive, costing no
// delivery), and runs them again after full-jitter waits: their handlers'
// calls are the probes that see the dependency come back.
//
// # Parked messages
//
// The consumer registers its handler with the Runner under Config.Name and
// stores each message with its execution (Request.Work and Input) until
// it completes. A name is one Consumer's on a Runner at a time: a new
// Consumer of the name (on a new connection, after the old one's Run
// returned) takes the registration over (see New). ListParked lists the consumer's parked messages with their
// reasons; RetryParked runs one again now, from the stored message,
// without a broker delivery (Message.Delivery is 0), once its cause is
// mended; a permanent failure of such a run parks the message again. The
// consumer's Reconciler resumes its stalled executions the same way.
//
// # Observing
//
// Config.Observer hears what the consumer does (Event): each fetch from
// the broker (how many deliveries it asked for and got), each delivery
// taken (with how long the message waited at the broker, where the
// broker says: Message.Published), each run of the handler (its
// duration and error) and what became of each delivery (DeliveryOutcome). The
// otelretry module turns them into OpenTelemetry metrics; Stats counts
// the same.
package consumer
