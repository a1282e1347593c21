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
 * silence and retransmits until the restore has the socket back.
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
 * Run nft with args, script (if any) on its stdin; what it says goes into out
 * (NUL-terminated).  Returns its exit status, or -errno if it could not run.
 */
static int run_nft(const char *const *args, const char *script, char *out, size_t len)
{
	const char *argv[8] = {"nft"};
	posix_spawn_file_actions_t fa;
	int in[2], msg[2], status, ret;
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
	ret = posix_spawnp(&pid, "nft", &fa, NULL, (char *const *)argv, environ);
	if (ret == ENOENT) /* root's PATH may lack sbin */
		ret = posix_spawn(&pid, "/usr/sbin/nft", &fa, NULL, (char *const *)argv, environ);
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
close_msg:
	close(msg[0]);
close_in:
	if (in[0] >= 0)
		close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	return ret;
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

static bool table_exists(const char *name)
{
	const char *args[] = {"list", "table", "inet", name, NULL};
	char out[256];

	return run_nft(args, NULL, out, sizeof(out)) == 0;
}

/* At exit: the lock stays only if the dump killed every locked process. */
static void netlock_release(void)
{
	bool alive = leave_running;
	char script[128];

	for (size_t i = 0; i < nr_locked; i++) {
		struct pollfd p = {.fd = locked[i].pidfd, .events = POLLIN};

		alive |= poll(&p, 1, 0) != 1;
		close(locked[i].pidfd);
	}
	nr_locked = 0;
	if (!alive) {
		pr_info("network lock kept: nft table inet %s drops the dumped connections' "
			"packets until amber restore removes it",
			table);
		return;
	}
	snprintf(script, sizeof(script), "delete table inet %s\n", table);
	if (nft_script(script, "network unlock after the dump"))
		pr_err("the dumped connections stay blocked: remove the lock with "
		       "'nft delete table inet %s'",
		       table);
	else
		pr_info("network lock removed: nft table inet %s", table);
}

static int create_table(struct dump_ctx *ctx)
{
	char script[512], name[64];
	uint32_t rnd = 0;
	int ret;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	snprintf(name, sizeof(name), "amber-%d-%08x", ctx->o->pid, rnd);
	snprintf(script, sizeof(script),
		 "add table inet %1$s\n"
		 "add chain inet %1$s in { type filter hook input priority filter; policy accept; "
		 "}\n"
		 "add chain inet %1$s out { type filter hook output priority filter; policy "
		 "accept; }\n",
		 name);
	ret = nft_script(script, "network lock");
	if (ret)
		return ret;
	snprintf(table, sizeof(table), "%s", name);
	leave_running = ctx->o->leave_running;
	if (atexit(netlock_release)) {
		snprintf(script, sizeof(script), "delete table inet %s\n", name);
		nft_script(script, "network unlock");
		table[0] = 0;
		return -ENOMEM;
	}
	pr_debug("network lock: nft table inet %s", table);
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
	snprintf(script, sizeof(script),
		 "add rule inet %1$s in %2$s saddr %3$s tcp sport %4$u %2$s daddr %5$s tcp dport "
		 "%6$u drop\n"
		 "add rule inet %1$s out %2$s saddr %5$s tcp sport %6$u %2$s daddr %3$s tcp dport "
		 "%4$u drop\n",
		 table, fs, dst, e->dst_port, src, e->src_port);
	ret = nft_script(script, what);
	if (ret)
		return ret;
	pr_debug("%s: locked %s:%u <-> %s:%u in nft table inet %s", what, src, e->src_port, dst,
		 e->dst_port, table);
	*name = table;
	return 0;
}

/* The name goes into an nft script: only what create_table makes. */
static bool valid_name(const char *name)
{
	size_t len = strlen(name);

	return len < sizeof(table) && !strncmp(name, "amber-", 6) &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

int netlock_unlock(struct tree *t, const char *name)
{
	char script[128];
	int ret;

	if (!valid_name(name)) {
		pr_err("files.img: the network lock table '%.64s' is not one amber makes; the "
		       "image is corrupt",
		       name);
		return -EBADMSG;
	}
	if (t->o->network_lock_skip) {
		pr_warn("--network-lock skip: the image's network lock stays; remove it with "
			"'nft delete table inet %s' once the connections may see packets",
			name);
		return 0;
	}
	if (!table_exists(name)) {
		pr_warn("the image's network lock, nft table inet %s, is already gone (removed "
			"by hand, or the machine rebooted): the peers may have reset the "
			"connections",
			name);
		return 0;
	}
	snprintf(script, sizeof(script), "delete table inet %s\n", name);
	ret = nft_script(script, "network unlock");
	if (ret)
		pr_err("the restored connections stay blocked by nft table inet %s: remove it "
		       "with 'nft delete table inet %s'",
		       name, name);
	else
		pr_info("network lock removed: nft table inet %s", name);
	return ret;
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
