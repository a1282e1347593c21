// SPDX-License-Identifier: MIT
/*
 * The network lock (netlock.h), with nft, as CRIU's --network-lock nft.
 *
 * Without it, a packet from the peer of a dumped connection that arrives
 * after the dump read the socket finds no socket (the dump killed the tree)
 * and is answered with a reset.  So before the dump puts a connection into
 * repair mode, a rule drops its packets in both directions (loopback
 * connections between two processes of the tree get rules from both ends),
 * in a table of amber's own, "inet amber-ROOTPID-RANDOM".  The peer sees
 * silence and retransmits until the restore has the socket back.  The
 * segments the restore makes for a peer (fwmark TCP_REPLAY_MARK, sk-tcp.c)
 * pass, so that it replays FINs while the real peer's are still held.
 *
 * The table lives as long as the connections it locks stay closed: amber
 * removes it at exit when the tree runs on (-R, or a failed dump), keeps it
 * when the dump killed the tree (each locked connection of the image names
 * it), and restore removes it once every socket exists again, just before
 * repair mode is turned off (as CRIU: "unlock network before disabling
 * repair mode").  A restore that fails before that leaves the lock, so that
 * it can be tried again without the peers having noticed anything.
 *
 * Only nft's own language: every expression used (ip/ip6/tcp matches, drop)
 * is core nf_tables, so no kernel module is needed beyond CONFIG_NF_TABLES.
 *
 * --network-lock iptables (CRIU's default name; nftables is nft): a chain of
 * amber's own, "amber-ipt-ROOTPID-RANDOM", in the filter tables of iptables
 * and ip6tables, jumped to first from INPUT and OUTPUT, with the same rules.
 * Written with iptables-restore --noflush, so that each step is one
 * transaction.  The image records the name, which tells the restore which
 * kind of lock to remove.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "netlock.h"
#include "ns/ns.h"
#include "sk-tcp.h"
#include "sys.h"

#define NFT_HINT "install nftables (apt install nftables) or use --network-lock skip"

extern char **environ;

static char table[64]; /* the dump's table, once created */
static bool leave_running;
static struct {
	pid_t pid;
	int pidfd;
} * locked; /* the processes whose connections are locked */
static size_t nr_locked;

/*
 * Run tool (nft, iptables-restore...) with args, script (if any) on its
 * stdin; what it says goes into out (NUL-terminated).  Returns its exit
 * status, or -errno if it could not run.
 */
static int run_tool(const char *tool, const char *const *args, const char *script, char *out,
		    size_t len)
{
	const char *argv[8] = {tool};
	char sbin[64];
	posix_spawn_file_actions_t fa;
	int in[2], msg[2], status, fault, ret;
	size_t n = 0, i;
	ssize_t r;
	pid_t pid;

	out[0] = 0;
	for (i = 0; args[i] && i + 2 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	if (pipe2(in, O_CLOEXEC))
		return -errno;
	if (pipe2(msg, O_CLOEXEC)) {
		ret = -errno;
		goto close_in;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, msg[1], 1);
	posix_spawn_file_actions_adddup2(&fa, msg[1], 2);
	ret = posix_spawnp(&pid, tool, &fa, NULL, (char *const *)argv, environ);
	snprintf(sbin, sizeof(sbin), "/usr/sbin/%s", tool);
	if (ret == ENOENT) /* root's PATH may lack sbin */
		ret = posix_spawn(&pid, sbin, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(msg[1]);
	in[0] = msg[1] = -1;
	if (ret) {
		ret = -ret;
		goto close_msg;
	}
	if (script && sys_write_full(in[1], script, strlen(script)) != (ssize_t)strlen(script))
		pr_debug("nft did not read all of its script");
	close(in[1]);
	in[1] = -1;
	while (n + 1 < len && (r = read(msg[0], out + n, len - n - 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += r;
	}
	out[n] = 0;
	while (n && out[n - 1] == '\n')
		out[--n] = 0;
	if (sys_waitpid(pid, &status, 0) != pid)
		ret = -ECHILD;
	else
		ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	/* AMBER_FAULT=spawn:N:ERR: the Nth run is taken as failed (delay: it returns 2 s late) */
	fault = sys_fault(SYS_SPAWN);
	if (fault)
		ret = -fault;
close_msg:
	close(msg[0]);
close_in:
	if (in[0] >= 0)
		close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	return ret;
}

static int run_nft(const char *const *args, const char *script, char *out, size_t len)
{
	return run_tool("nft", args, script, out, len);
}

/* Run an nft script; failures are logged with what was being done. */
static int nft_script(const char *script, const char *what)
{
	static const char *const args[] = {"-f", "-", NULL};
	char out[1024];
	int ret = run_nft(args, script, out, sizeof(out));

	if (ret == -ENOENT) {
		pr_err("%s: nft not found: " NFT_HINT, what);
		return ret;
	}
	if (ret < 0) {
		pr_err("%s: cannot run nft: %s (" NFT_HINT ")", what, strerror(-ret));
		return ret;
	}
	if (ret) {
		pr_err("%s: nft failed (exit %d): %s", what, ret, out);
		return -EIO;
	}
	return 0;
}

#define IPT_PREFIX "amber-ipt-"
#define IPT_HINT   "install iptables (apt install iptables) or use --network-lock nft or skip"

/* A lock of iptables (a chain of amber's, in IPv4's and IPv6's filter tables), not nft? */
static bool is_ipt(const char *name)
{
	return !strncmp(name, IPT_PREFIX, strlen(IPT_PREFIX));
}

/* Run an iptables-restore script (--noflush: only the lines given) for IPv4 and IPv6. */
static int ipt_script(const char *script, const char *what, bool v4, bool v6)
{
	static const char *const args[] = {"-w", "--noflush", NULL};
	static const char *const tools[] = {"iptables-restore", "ip6tables-restore"};
	char out[1024];
	int ret = 0;

	for (int i = 0; i < 2 && !ret; i++) {
		if (!(i ? v6 : v4))
			continue;
		ret = run_tool(tools[i], args, script, out, sizeof(out));
		if (ret == -ENOENT) {
			pr_err("%s: %s not found: " IPT_HINT, what, tools[i]);
		} else if (ret < 0) {
			pr_err("%s: cannot run %s: %s (" IPT_HINT ")", what, tools[i],
			       strerror(-ret));
		} else if (ret) {
			pr_err("%s: %s failed (exit %d): %s", what, tools[i], ret, out);
			ret = -EIO;
		}
	}
	return ret;
}

/* The command that removes lock name, for messages. */
static const char *unlock_cmd(const char *name)
{
	static char buf[384];

	if (is_ipt(name))
		snprintf(buf, sizeof(buf),
			 "for t in iptables ip6tables; do $t -w -D INPUT -j %1$s; "
			 "$t -w -D OUTPUT -j %1$s; $t -w -F %1$s; $t -w -X %1$s; done",
			 name);
	else
		snprintf(buf, sizeof(buf), "nft delete table inet %s", name);
	return buf;
}

static const char *lock_name(const char *name)
{
	static char buf[96];

	snprintf(buf, sizeof(buf),
		 is_ipt(name) ? "iptables chain %s (filter table)" : "nft table inet %s", name);
	return buf;
}

static bool table_exists(const char *name)
{
	const char *nft[] = {"list", "table", "inet", name, NULL};
	const char *ipt[] = {"-w", "-n", "-L", name, NULL};
	char out[256];

	if (is_ipt(name))
		return run_tool("iptables", ipt, NULL, out, sizeof(out)) == 0 ||
		       run_tool("ip6tables", ipt, NULL, out, sizeof(out)) == 0;
	return run_nft(nft, NULL, out, sizeof(out)) == 0;
}

/* Remove lock name (both families' chains for iptables); logged on failure. */
static int remove_lock(const char *name, const char *what)
{
	char script[256];

	if (!is_ipt(name)) {
		snprintf(script, sizeof(script), "delete table inet %s\n", name);
		return nft_script(script, what);
	}
	snprintf(script, sizeof(script),
		 "*filter\n-D INPUT -j %1$s\n-D OUTPUT -j %1$s\n-F %1$s\n-X %1$s\nCOMMIT\n", name);
	return ipt_script(script, what, true, true);
}

/* At exit: the lock stays only if the dump killed every locked process. */
static void netlock_release(void)
{
	bool alive = leave_running;

	for (size_t i = 0; i < nr_locked; i++) {
		struct pollfd p = {.fd = locked[i].pidfd, .events = POLLIN};

		alive |= poll(&p, 1, 0) != 1;
		close(locked[i].pidfd);
	}
	nr_locked = 0;
	if (!alive) {
		pr_info("network lock kept: %s drops the dumped connections' packets until "
			"amber restore removes it",
			lock_name(table));
		return;
	}
	if (remove_lock(table, "network unlock after the dump"))
		pr_err("the dumped connections stay blocked: remove the lock with '%s'",
		       unlock_cmd(table));
	else
		pr_info("network lock removed: %s", lock_name(table));
}

static int create_table(struct dump_ctx *ctx)
{
	char script[512], name[64];
	bool ipt = ctx->o->netlock_ipt;
	uint32_t rnd = 0;
	int ret;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	/* an iptables chain's name has at most 28 characters: this has at most 26 */
	snprintf(name, sizeof(name), "%s%d-%08x", ipt ? IPT_PREFIX : "amber-", ctx->o->pid, rnd);
	if (ipt) {
		snprintf(script, sizeof(script),
			 "*filter\n:%1$s - [0:0]\n-I INPUT 1 -j %1$s\n-I OUTPUT 1 -j %1$s\n"
			 "COMMIT\n",
			 name);
		ret = ipt_script(script, "network lock", true, false);
		if (!ret) {
			ret = ipt_script(script, "network lock", false, true);
			if (ret) {
				snprintf(script, sizeof(script),
					 "*filter\n-D INPUT -j %1$s\n-D OUTPUT -j %1$s\n-X %1$s\n"
					 "COMMIT\n",
					 name);
				ipt_script(script, "network unlock", true, false);
			}
		}
	} else {
		snprintf(script, sizeof(script),
			 "add table inet %1$s\n"
			 "add chain inet %1$s in { type filter hook input priority filter; policy "
			 "accept; }\n"
			 "add chain inet %1$s out { type filter hook output priority filter; "
			 "policy accept; }\n",
			 name);
		ret = nft_script(script, "network lock");
	}
	if (ret)
		return ret;
	snprintf(table, sizeof(table), "%s", name);
	leave_running = ctx->o->leave_running;
	if (atexit(netlock_release)) {
		remove_lock(name, "network unlock");
		table[0] = 0;
		return -ENOMEM;
	}
	ctx->tree->kill_waits = true; /* netlock_release() keeps it for dead processes */
	pr_debug("network lock: %s", lock_name(table));
	return 0;
}

/* Its pidfd tells at exit whether the dump killed it. */
static int track_process(struct dump_ctx *ctx)
{
	typeof(locked) n;
	int fd;

	for (size_t i = 0; i < nr_locked; i++)
		if (locked[i].pid == ctx->pid)
			return 0;
	n = realloc(locked, (nr_locked + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	locked = n;
	fd = fcntl(ctx->pidfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	locked[nr_locked].pid = ctx->pid;
	locked[nr_locked++].pidfd = fd;
	return 0;
}

/* An address of e as nft writes it: "ip 1.2.3.4" or "ip6 ::1" (v4-mapped: ip). */
static int nft_addr(const ProtobufCBinaryData *b, char *out, size_t len, const char **fam)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	char a[INET6_ADDRSTRLEN];

	if (b->len == 16 && !memcmp(b->data, mapped, 12)) {
		inet_ntop(AF_INET, b->data + 12, a, sizeof(a));
		*fam = "ip";
	} else if (b->len == 4 || b->len == 16) {
		inet_ntop(b->len == 4 ? AF_INET : AF_INET6, b->data, a, sizeof(a));
		*fam = b->len == 4 ? "ip" : "ip6";
	} else {
		return -EINVAL;
	}
	snprintf(out, len, "%s", a);
	return 0;
}

int netlock_connection(struct dump_ctx *ctx, const InetSkEntry *e, const char *what,
		       const char **name)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], script[1024];
	const char *fs, *fd;
	int ret;

	*name = NULL;
	if (ctx->o->network_lock_skip)
		return 0;
	/*
	 * A connection of a network namespace of the tree: the namespace (its
	 * veths with it) goes when the dump kills the tree, so a peer's packet
	 * finds no link rather than no socket (see README, Limits).
	 */
	if (netns_inside()) {
		pr_debug("%s: in network namespace %u of the tree: not locked", what,
			 netns_inside());
		return 0;
	}
	if (nft_addr(&e->src_addr, src, sizeof(src), &fs) ||
	    nft_addr(&e->dst_addr, dst, sizeof(dst), &fd) || strcmp(fs, fd)) {
		pr_err("%s: cannot tell the addresses of the connection to lock it", what);
		return -EINVAL;
	}
	if (!table[0]) {
		ret = create_table(ctx);
		if (ret)
			return ret;
	}
	ret = track_process(ctx);
	if (ret)
		return ret;
	if (is_ipt(table)) {
		/* one chain, jumped to from INPUT and OUTPUT: both directions in each */
		snprintf(script, sizeof(script),
			 "*filter\n"
			 "-A %1$s -s %2$s -d %4$s -p tcp --sport %3$u --dport %5$u "
			 "-m mark ! --mark %6$#x -j DROP\n"
			 "-A %1$s -s %4$s -d %2$s -p tcp --sport %5$u --dport %3$u "
			 "-m mark ! --mark %6$#x -j DROP\n"
			 "COMMIT\n",
			 table, dst, e->dst_port, src, e->src_port, TCP_REPLAY_MARK);
		ret = ipt_script(script, what, !strcmp(fs, "ip"), strcmp(fs, "ip"));
	} else {
		snprintf(script, sizeof(script),
			 "add rule inet %1$s in %2$s saddr %3$s tcp sport %4$u %2$s daddr %5$s "
			 "tcp dport %6$u meta mark != %7$#x drop\n"
			 "add rule inet %1$s out %2$s saddr %5$s tcp sport %6$u %2$s daddr %3$s "
			 "tcp dport %4$u meta mark != %7$#x drop\n",
			 table, fs, dst, e->dst_port, src, e->src_port, TCP_REPLAY_MARK);
		ret = nft_script(script, what);
	}
	if (ret)
		return ret;
	pr_debug("%s: locked %s:%u <-> %s:%u in %s", what, src, e->src_port, dst, e->dst_port,
		 lock_name(table));
	*name = table;
	return 0;
}

/* The name goes into an nft or iptables script: only what create_table makes. */
static bool valid_name(const char *name)
{
	size_t len = strlen(name);

	return len <= 28 && !strncmp(name, "amber-", 6) &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

/* The locks this restore removed (netlock_restore_failed names the others). */
static char **removed;
static size_t nr_removed;

static void note_removed(const char *name)
{
	char **n = realloc(removed, (nr_removed + 1) * sizeof(*n));

	if (!n)
		return;
	removed = n;
	removed[nr_removed] = strdup(name);
	if (removed[nr_removed])
		nr_removed++;
}

int netlock_unlock(struct tree *t, const char *name)
{
	int ret;

	if (!valid_name(name)) {
		pr_err("files.img: the network lock '%.64s' is not one amber makes; the image is "
		       "corrupt",
		       name);
		return -EBADMSG;
	}
	if (t->o->network_lock_skip) {
		pr_warn("--network-lock skip: the image's network lock stays; remove it with "
			"'%s' once the connections may see packets",
			unlock_cmd(name));
		note_removed(name); /* said already */
		return 0;
	}
	if (!table_exists(name)) {
		pr_warn("the image's network lock, %s, is already gone (removed by hand, or the "
			"machine rebooted): the peers may have reset the connections",
			lock_name(name));
		note_removed(name);
		return 0;
	}
	ret = remove_lock(name, "network unlock");
	if (ret) {
		pr_err("the restored connections stay blocked by %s: remove it with '%s'",
		       lock_name(name), unlock_cmd(name));
	} else {
		pr_info("network lock removed: %s", lock_name(name));
		note_removed(name);
	}
	return ret;
}

void netlock_restore_failed(struct tree *t)
{
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		const InetSkEntry *e = t->rfiles[i] ? t->rfiles[i]->inet_sk : NULL;
		bool said = false;

		if (!e || !e->netlock_table || !valid_name(e->netlock_table))
			continue;
		for (size_t k = 0; k < nr_removed && !said; k++)
			said = !strcmp(removed[k], e->netlock_table);
		for (size_t k = 0; k < i && !said; k++)
			said = t->rfiles[k] && t->rfiles[k]->inet_sk &&
			       t->rfiles[k]->inet_sk->netlock_table &&
			       !strcmp(t->rfiles[k]->inet_sk->netlock_table, e->netlock_table);
		if (said)
			continue;
		pr_err("the network lock of the image, %s, stays in place so that the restore "
		       "can be tried again; if the image is abandoned, remove it with '%s'",
		       lock_name(e->netlock_table), unlock_cmd(e->netlock_table));
	}
}

int netlock_probe(char *why, size_t len)
{
	static const char *const args[] = {"list", "tables", NULL};
	char out[512];
	int ret = run_nft(args, NULL, out, sizeof(out));

	if (ret == -ENOENT)
		snprintf(why, len, "nft not found: " NFT_HINT);
	else if (ret < 0)
		snprintf(why, len, "cannot run nft: %s", strerror(-ret));
	else if (ret)
		snprintf(why, len, "nft list tables failed (exit %d): %.200s", ret, out);
	else
		snprintf(why, len, "nft lists the tables (locks TCP connections during a dump)");
	return ret < 0 ? ret : ret ? -EIO : 0;
}
