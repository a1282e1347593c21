// SPDX-License-Identifier: MIT
/*
 * Command line options: one table, CRIU's names and meanings.  The parser,
 * `amber help COMMAND`/`COMMAND --help` and the check that the man page
 * lists every option all read the table, so help cannot drift from the
 * code.  Options come from the default configuration files, then --config
 * files, then the command line (later ones win), in CRIU's format: one
 * option per line, its long name without dashes, then its value.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

enum {
	FOR_DUMP = 1 << CMD_DUMP,
	FOR_RESTORE = 1 << CMD_RESTORE,
	FOR_CHECK = 1 << CMD_CHECK,
	FOR_SHOW = 1 << CMD_SHOW,
	FOR_DR = FOR_DUMP | FOR_RESTORE,
};

/* Long-only options: codes above any character. */
enum {
	O_PIDFILE = 256,
	O_TCP_ESTABLISHED,
	O_SKIP_IN_FLIGHT,
	O_TCP_CLOSE,
	O_NETWORK_LOCK,
	O_DISPLAY_STATS,
	O_CONFIG,
	O_NO_DEFAULT_CONFIG,
	O_ACTION_SCRIPT,
	O_JSON,
	O_STATS,
	O_GHOST_LIMIT,
	O_LINK_REMAP,
	O_NEW_PIDNS,
	O_MANAGE_CGROUPS,
	O_FREEZE_CGROUP,
	O_EXTERNAL,
	O_ROOT,
	O_UNIMPLEMENTED,
	O_NEGATED = 1 << 12, /* --no-NAME of a flag: code | O_NEGATED */
};

static const struct opt_def {
	const char *name;
	int code; /* the short option's character, or O_* */
	int has_arg;
	int cmds;
	const char *arg; /* its value, as help names it */
	const char *help;
} table[] = {
	{"tree", 't', required_argument, FOR_DUMP, "PID",
	 "dump the process PID and every process below it"},
	{"images-dir", 'D', required_argument, FOR_DR | FOR_SHOW, "DIR",
	 "the image directory (dump: new or empty, amber makes it)"},
	{"work-dir", 'W', required_argument, FOR_DR, "DIR",
	 "where --log-file goes, if relative (default: the image directory)"},
	{"leave-running", 'R', no_argument, FOR_DUMP, NULL,
	 "let the processes run on after the dump instead of killing them"},
	{"leave-stopped", 's', no_argument, FOR_DR, NULL,
	 "leave the processes stopped (SIGSTOP) after the dump or restore"},
	{"restore-detached", 'd', no_argument, FOR_RESTORE, NULL,
	 "return once the processes run, instead of waiting for the root"},
	{"pidfile", O_PIDFILE, required_argument, FOR_RESTORE, "FILE",
	 "write the restored root's pid to FILE"},
	{"shell-job", 'j', no_argument, FOR_DR, NULL,
	 "a job of a shell: it takes amber's terminal, session and group"},
	{"new-pidns", O_NEW_PIDNS, no_argument, FOR_RESTORE, NULL,
	 "restore in a new pid namespace, where the pids are free (amber stays as its init)"},
	{"external", O_EXTERNAL, required_argument, FOR_DR, "RES",
	 "restore veth[IF]:HOST[@BR]: veth IF's host side HOST (on bridge BR); a mount the "
	 "runtime provides: dump mnt[MOUNTPOINT]:KEY (saved by KEY), restore mnt[KEY]:PATH"},
	{"root", O_ROOT, required_argument, FOR_RESTORE, "DIR",
	 "the rootfs of a tree that pivot_root()ed (a container): its root mount"},
	{"tcp-established", O_TCP_ESTABLISHED, no_argument, FOR_DR, NULL,
	 "dump and restore established TCP connections (TCP repair)"},
	{"tcp-close", O_TCP_CLOSE, no_argument, FOR_DR, NULL,
	 "connections come back reset (dump: taken without TCP repair)"},
	{"skip-in-flight", O_SKIP_IN_FLIGHT, no_argument, FOR_DUMP, NULL,
	 "drop connections waiting in a listener's accept queue that cannot come back (else "
	 "refused)"},
	{"file-locks", 'l', no_argument, FOR_DR, NULL,
	 "dump and restore file locks (flock, POSIX, OFD, leases)"},
	{"ghost-limit", O_GHOST_LIMIT, required_argument, FOR_DUMP, "SIZE",
	 "largest deleted file saved with its data (default 1M; K, M, G suffixes)"},
	{"link-remap", O_LINK_REMAP, no_argument, FOR_DUMP, NULL,
	 "an open file unlinked but linked elsewhere: keep it by a link made beside it"},
	{"network-lock", O_NETWORK_LOCK, required_argument, FOR_DR, "MODE",
	 "how TCP connections are held between dump and restore: nft (default; or nftables), "
	 "iptables, skip"},
	{"manage-cgroups", O_MANAGE_CGROUPS, optional_argument, FOR_DR, "MODE",
	 "restore: soft (the default: make missing cgroups with their settings), full (set "
	 "the settings on existing ones too), ignore (leave the processes in amber's)"},
	{"freeze-cgroup", O_FREEZE_CGROUP, required_argument, FOR_DUMP, "PATH",
	 "freeze the tree through its cgroup's freezer (v2 cgroup.freeze, v1 freezer.state); "
	 "the cgroup must hold the tree and nothing else"},
	{"display-stats", O_DISPLAY_STATS, no_argument, FOR_DR, NULL,
	 "print what the dump or restore measured (times, pages) at the end"},
	{"log-file", 'o', required_argument, FOR_DR, "FILE",
	 "write the log to FILE (relative: in the work directory)"},
	{"verbosity", 'v', optional_argument, FOR_DR | FOR_CHECK | FOR_SHOW, "N",
	 "-v, -vv...: more messages; -vN: CRIU's level N (0 none, 1 errors, 2 warnings, 3 "
	 "info, 4 debug)"},
	{"config", O_CONFIG, required_argument, FOR_DR, "FILE",
	 "read options from FILE (one per line: name, then value)"},
	{"no-default-config", O_NO_DEFAULT_CONFIG, no_argument, FOR_DR, NULL,
	 "do not read /etc/amber/default.conf and ~/.amber/default.conf"},
	{"action-script", O_ACTION_SCRIPT, required_argument, FOR_DR, "FILE",
	 "run FILE at each stage, CRIU's way (CRTOOLS_SCRIPT_ACTION=pre-dump...)"},
	{"json", O_JSON, no_argument, FOR_CHECK, NULL, "print the result as JSON"},
	{"stats", O_STATS, no_argument, FOR_SHOW, NULL,
	 "show what the dump and the last restore of DIR measured"},
	{"help", 'h', no_argument, FOR_DR | FOR_CHECK | FOR_SHOW, NULL, "this list of options"},
};

#define NR_OPTS (sizeof(table) / sizeof(table[0]))

/* CRIU's options that amber does not do: refused by name, never ignored. */
static const struct {
	const char *name;
	int has_arg;
	const char *why;
} unimplemented[] = {
	{"prev-images-dir", required_argument, "incremental dumps (pre-dump) are not implemented"},
	{"track-mem", no_argument, "incremental dumps (pre-dump) are not implemented"},
	{"auto-dedup", no_argument, "incremental dumps (pre-dump) are not implemented"},
	{"page-server", no_argument, "there is no page server: dump to a directory"},
	{"lazy-pages", no_argument, "lazy (post-copy) restore is not implemented"},
	{"cgroup-root", required_argument, "cgroups come back at the paths they had"},
	{"cgroup-props", required_argument, "the dumped cgroup settings are the ones restored"},
	{"evasive-devices", no_argument, "device files are reopened at their paths only"},
	{"force-irmap", no_argument, "inotify watches are resolved through /proc"},
	{"cpu-cap", optional_argument, "amber checks the XSAVE features it needs itself"},
	{"log-pid", no_argument, "there is one log"},
	{"restore-sibling", no_argument, "the root is restored as amber's child"},
	{"libdir", required_argument, "amber has no plugins"},
	{"close", required_argument, "amber closes nothing it did not open"},
};

#define NR_UNIMPL (sizeof(unimplemented) / sizeof(unimplemented[0]))

static const char *const cmd_names[] = {
	[CMD_DUMP] = "dump", [CMD_RESTORE] = "restore", [CMD_CHECK] = "check", [CMD_SHOW] = "show"};

static const char *const cmd_usage[] = {
	[CMD_DUMP] = "dump -t PID -D DIR [OPTIONS]\n"
		     "  checkpoint process PID and its descendants into DIR, then kill them\n",
	[CMD_RESTORE] =
		"restore -D DIR [OPTIONS]\n"
		"  recreate the processes of DIR with their pids; without -d, wait for the\n"
		"  root and exit with its status\n",
	[CMD_CHECK] = "check [OPTIONS]\n"
		      "  probe the kernel features amber uses; exit 0 when dump and restore can\n"
		      "  work here\n",
	[CMD_SHOW] = "show [OPTIONS] DIR [ps|fds|mems]\n"
		     "  print the image in DIR as JSON, or one view of it as a table: ps (the\n"
		     "  processes), fds (their fds, cwd and root), mems (mappings and pages)\n",
};

int opts_cmd(const char *name)
{
	for (int c = 0; c < CMD__COUNT; c++)
		if (!strcmp(cmd_names[c], name))
			return c;
	return -1;
}

void opts_usage(FILE *f, int cmd)
{
	fprintf(f, "usage: amber %s\noptions:\n", cmd_usage[cmd]);
	for (size_t i = 0; i < NR_OPTS; i++) {
		const struct opt_def *d = &table[i];
		char left[64];
		int n = 0;

		if (!(d->cmds & (1 << cmd)))
			continue;
		if (d->code < 256)
			n = snprintf(left, sizeof(left), "-%c, ", d->code);
		n += snprintf(left + n, sizeof(left) - n, "--%s", d->name);
		if (d->has_arg == required_argument)
			snprintf(left + n, sizeof(left) - n, " %s", d->arg);
		else if (d->has_arg == optional_argument)
			snprintf(left + n, sizeof(left) - n, "[=%s]", d->arg);
		fprintf(f, "  %-28s %s\n", left, d->help);
	}
}

void opts_list(FILE *f)
{
	for (size_t i = 0; i < NR_OPTS; i++) {
		fprintf(f, "--%s", table[i].name);
		for (int c = 0; c < CMD__COUNT; c++)
			if (table[i].cmds & (1 << c))
				fprintf(f, " %s", cmd_names[c]);
		fputc('\n', f);
	}
}

/* ---- configuration files ---- */

struct args {
	char **v;
	int n, cap;
};

static int args_add(struct args *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		int cap = a->cap ? 2 * a->cap : 32;
		char **nv = realloc(a->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = cap;
	}
	a->v[a->n] = strdup(s);
	if (!a->v[a->n])
		return -ENOMEM;
	a->v[++a->n] = NULL;
	return 0;
}

/* FILE's options, as if given on the command line; a missing default file is no error. */
static int read_config(struct args *a, const char *path, bool must_exist)
{
	char line[PATH_MAX + 128];
	int ret = 0, nr = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		/* a default file that is not there, or not ours to read (nobody's
		 * HOME may be /root): as if absent */
		if (!must_exist && (errno == ENOENT || errno == EACCES || errno == ENOTDIR))
			return 0;
		pr_err("cannot read the configuration file %s: %m", path);
		return -errno;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		char *p = line, *name, *val, opt[128];

		nr++;
		p[strcspn(p, "\n")] = 0;
		p += strspn(p, " \t");
		if (!*p || *p == '#')
			continue;
		while (*p == '-')
			p++;
		name = p;
		p += strcspn(p, " \t=");
		val = *p ? p + 1 : p;
		*p = 0;
		val += strspn(val, " \t=");
		for (char *e = val + strlen(val); e > val && (e[-1] == ' ' || e[-1] == '\t');)
			*--e = 0;
		if (strlen(name) > sizeof(opt) - 3) {
			pr_err("%s:%d: '%s' is no option", path, nr, name);
			ret = -EINVAL;
			break;
		}
		snprintf(opt, sizeof(opt), "--%s", name);
		ret = args_add(a, opt);
		if (!ret && *val)
			ret = args_add(a, val);
	}
	fclose(f);
	return ret;
}

static int with_configs(int argc, char **argv, struct args *a)
{
	bool defaults = true;
	const char *home = getenv("HOME");
	char path[PATH_MAX];
	int ret = args_add(a, argv[0]);

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--no-default-config"))
			defaults = false;
	if (!ret && defaults)
		ret = read_config(a, "/etc/amber/default.conf", false);
	if (!ret && defaults && home && *home) {
		snprintf(path, sizeof(path), "%s/.amber/default.conf", home);
		ret = read_config(a, path, false);
	}
	for (int i = 1; !ret && i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			ret = read_config(a, argv[++i], true);
		else if (!strncmp(argv[i], "--config=", 9))
			ret = read_config(a, argv[i] + 9, true);
	}
	for (int i = 1; !ret && i < argc; i++)
		ret = args_add(a, argv[i]);
	return ret;
}

static void args_free(struct args *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

/* ---- parsing ---- */

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v <= 0 || v > INT_MAX) {
		pr_err("-t takes a process id (a positive number), not '%s'", s);
		return -EINVAL;
	}
	*pid = (pid_t)v;
	return 0;
}

/* CRIU's -v: alone or repeated (-vvv) one level more each, -vN level N of 0..4. */
static int parse_verbosity(const char *arg)
{
	char *end;
	long n;

	if (!arg) {
		log_level++;
		return 0;
	}
	if (strspn(arg, "v") == strlen(arg)) {
		log_level += 1 + (int)strlen(arg);
		return 0;
	}
	n = strtol(arg, &end, 10);
	if (*end || n < 0 || n > 4) {
		pr_err("-v takes a level from 0 to 4 (CRIU's), not '%s'", arg);
		return -EINVAL;
	}
	log_level = (int)n - 1; /* CRIU's 1 (errors) is LOG_ERR */
	return 0;
}

/* SIZE as CRIU takes it: bytes, or with a K, M or G suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'G':
	case 'g':
		v <<= 10;
		/* fallthrough */
	case 'M':
	case 'm':
		v <<= 10;
		/* fallthrough */
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	}
	if (*end || v > (1ull << 50))
		return -EINVAL;
	*out = v;
	return 0;
}

static int set_opt(struct opts *o, int code, const char *arg, bool neg)
{
	switch (code) {
	case 't':
		return parse_pid(arg, &o->pid);
	case 'D':
		o->dir = arg;
		return 0;
	case 'W':
		o->work_dir = arg;
		return 0;
	case 'R':
		o->leave_running = !neg;
		return 0;
	case 's':
		o->leave_stopped = !neg;
		return 0;
	case 'd':
		o->detached = !neg;
		return 0;
	case O_PIDFILE:
		o->pidfile = arg;
		return 0;
	case 'j':
		o->shell_job = !neg;
		return 0;
	case 'l':
		o->file_locks = !neg;
		return 0;
	case O_LINK_REMAP:
		o->link_remap = !neg;
		return 0;
	case O_NEW_PIDNS:
		o->new_pidns = !neg;
		return 0;
	case O_EXTERNAL:
		if (!strncmp(arg, "mnt[", 4))
			return mnt_external(arg) ? -1 : 0;
		o->veth_external = true;
		return netns_external(arg) ? -1 : 0;
	case O_ROOT:
		o->root = arg;
		return 0;
	case O_TCP_ESTABLISHED:
		o->tcp_established = !neg;
		return 0;
	case O_SKIP_IN_FLIGHT:
		o->skip_in_flight = !neg;
		return 0;
	case O_TCP_CLOSE:
		o->tcp_close = !neg;
		return 0;
	case O_NETWORK_LOCK:
		/* CRIU's names too: iptables, nftables */
		if (strcmp(arg, "nft") && strcmp(arg, "nftables") && strcmp(arg, "iptables") &&
		    strcmp(arg, "skip")) {
			pr_err("--network-lock takes nft or nftables (the default), iptables or "
			       "skip, not '%s'",
			       arg);
			return -EINVAL;
		}
		o->network_lock_skip = !strcmp(arg, "skip");
		o->netlock_ipt = !strcmp(arg, "iptables");
		return 0;
	case O_MANAGE_CGROUPS:
		/* CRIU's modes; props and strict are not amber's */
		if (arg && strcmp(arg, "soft") && strcmp(arg, "full") && strcmp(arg, "ignore")) {
			pr_err("--manage-cgroups takes soft (the default), full or ignore, not "
			       "'%s'",
			       arg);
			return -EINVAL;
		}
		o->manage_cgroups = arg && strcmp(arg, "soft") ? arg : NULL;
		return 0;
	case O_FREEZE_CGROUP:
		o->freeze_cgroup = arg;
		return 0;
	case O_DISPLAY_STATS:
		o->display_stats = !neg;
		return 0;
	case O_GHOST_LIMIT:
		if (parse_size(arg, &o->ghost_limit)) {
			pr_err("--ghost-limit takes a size in bytes (or with K, M, G), not '%s'",
			       arg);
			return -EINVAL;
		}
		return 0;
	case 'o':
		o->log_file = arg;
		return 0;
	case 'v':
		return parse_verbosity(arg);
	case O_CONFIG:
	case O_NO_DEFAULT_CONFIG:
		return 0; /* read before parsing */
	case O_ACTION_SCRIPT:
		if (o->nr_scripts == MAX_ACTION_SCRIPTS) {
			pr_err("at most %d --action-script options", MAX_ACTION_SCRIPTS);
			return -EINVAL;
		}
		o->scripts[o->nr_scripts++] = arg;
		return 0;
	case O_JSON:
		o->json = !neg;
		return 0;
	case O_STATS:
		o->stats = !neg;
		return 0;
	case 'h':
		o->help = true;
		return 0;
	}
	return -EINVAL;
}

/* What the options mean together, once all are known. */
static int check_opts(struct opts *o, int cmd)
{
	struct stat st;

	if (o->help)
		return 0;
	if (cmd == CMD_DUMP) {
		if (!o->pid) {
			pr_err("dump needs -t PID: the process to dump (e.g. amber dump -t 1234 -D "
			       "/tmp/img)");
			return -EINVAL;
		}
		if (!o->dir) {
			pr_err("dump needs -D DIR: where the image goes (e.g. amber dump -t %d -D "
			       "/tmp/img)",
			       o->pid);
			return -EINVAL;
		}
		if (o->veth_external) {
			pr_err("--external veth[...] is for restore: a dump takes only "
			       "--external mnt[MOUNTPOINT]:KEY");
			return -EINVAL;
		}
		if (o->leave_running && o->leave_stopped) {
			pr_err("-R (--leave-running) and -s (--leave-stopped) contradict each "
			       "other: "
			       "give one");
			return -EINVAL;
		}
	}
	if (cmd == CMD_RESTORE) {
		if (!o->dir) {
			pr_err("restore needs -D DIR (the image directory written by amber dump)");
			return -EINVAL;
		}
		if (stat(o->dir, &st)) {
			pr_err("image directory %s: %m%s", o->dir,
			       errno == ENOENT ? " (give the -D of the dump)" : "");
			return -ENOENT;
		}
		if (!S_ISDIR(st.st_mode)) {
			pr_err("%s is not a directory: -D takes the image directory", o->dir);
			return -ENOTDIR;
		}
	}
	if (o->work_dir && (stat(o->work_dir, &st) || !S_ISDIR(st.st_mode))) {
		pr_err("work directory %s: %s", o->work_dir,
		       errno == ENOENT ? "no such directory (-W needs an existing one)"
				       : "not a directory");
		return -ENOENT;
	}
	return 0;
}

static int refuse_unimplemented(const char *name)
{
	for (size_t i = 0; i < NR_UNIMPL; i++)
		if (!strcmp(unimplemented[i].name, name)) {
			pr_err("--%s is CRIU's option; amber does not implement it: %s",
			       unimplemented[i].name, unimplemented[i].why);
			return -ENOTSUP;
		}
	return -EINVAL;
}

int opts_parse(int argc, char **argv, struct opts *o, int cmd)
{
	struct option lopts[2 * NR_OPTS + NR_UNIMPL + 1];
	char shorts[3 * NR_OPTS + 2];
	struct args a = {0};
	int n = 0, s = 0, c, idx, ret;

	shorts[s++] = ':'; /* a missing value is told apart from an unknown option */
	for (size_t i = 0; i < NR_OPTS; i++) {
		const struct opt_def *d = &table[i];

		if (!(d->cmds & (1 << cmd)))
			continue;
		lopts[n++] = (struct option){d->name, d->has_arg, NULL, d->code};
		if (d->has_arg == no_argument && d->code != 'h') {
			static char negs[NR_OPTS][64];

			snprintf(negs[i], sizeof(negs[i]), "no-%s", d->name);
			if (strcmp(d->name, "no-default-config"))
				lopts[n++] = (struct option){negs[i], no_argument, NULL,
							     d->code | O_NEGATED};
		}
		if (d->code >= 256)
			continue;
		shorts[s++] = (char)d->code;
		if (d->has_arg == required_argument)
			shorts[s++] = ':';
		else if (d->has_arg == optional_argument)
			shorts[s++] = ':', shorts[s++] = ':';
	}
	shorts[s] = 0;
	for (size_t i = 0; i < NR_UNIMPL; i++)
		lopts[n++] = (struct option){unimplemented[i].name, unimplemented[i].has_arg, NULL,
					     O_UNIMPLEMENTED};
	memset(&lopts[n], 0, sizeof(lopts[n]));

	o->ghost_limit = 1 << 20; /* CRIU's default */
	ret = cmd == CMD_DUMP || cmd == CMD_RESTORE ? with_configs(argc, argv, &a) : 0;
	if (!ret && !a.v) {
		for (int i = 0; !ret && i < argc; i++)
			ret = args_add(&a, argv[i]);
	}
	if (ret)
		goto free_args;
	/* the strings live in a.v: keep them for the options that point into them */
	optind = 0; /* glibc: start over, also after an earlier parse */
	opterr = 0;
	while (!ret && (c = getopt_long(a.n, a.v, shorts, lopts, &idx)) != -1) {
		if (c == '?' || c == ':') {
			const char *bad = a.v[optind - 1];

			if (c == ':')
				pr_err("%s: option %s needs a value", cmd_names[cmd], bad);
			else if (!optopt && !strncmp(bad, "--", 2))
				pr_err("%s: unknown option %s (amber %s --help lists them)",
				       cmd_names[cmd], bad, cmd_names[cmd]);
			else
				pr_err("%s: unknown option -%c (amber %s --help lists them)",
				       cmd_names[cmd], optopt, cmd_names[cmd]);
			ret = -EINVAL;
		} else if (c == O_UNIMPLEMENTED) {
			ret = refuse_unimplemented(lopts[idx].name);
		} else {
			ret = set_opt(o, c & ~O_NEGATED, optarg, c & O_NEGATED);
		}
	}
	if (ret)
		goto free_args;
	for (int i = optind; i < a.n && !ret; i++) {
		if (cmd != CMD_SHOW || o->nr_args == MAX_ARGS) {
			pr_err("%s: unexpected argument '%s'", cmd_names[cmd], a.v[i]);
			ret = -EINVAL;
			break;
		}
		o->args[o->nr_args++] = a.v[i];
	}
	if (!ret)
		ret = check_opts(o, cmd);
	if (!ret) {
		o->argv_store = a.v; /* o points into them */
		return 0;
	}
free_args:
	args_free(&a);
	return ret;
}

/* The strings opts_parse() kept, which o's string options point into. */
void opts_free(struct opts *o)
{
	if (!o->argv_store)
		return;
	for (char **v = o->argv_store; *v; v++)
		free(*v);
	free(o->argv_store);
	o->argv_store = NULL;
}

int opts_open_log(const struct opts *o)
{
	const char *wd = o->work_dir ? o->work_dir : o->dir;
	int dirfd = AT_FDCWD, fd, ret;
	struct stat st;

	if (!o->log_file)
		return 0;
	if (wd && o->log_file[0] != '/') {
		dirfd = sys_open(wd, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
		if (dirfd < 0) {
			pr_err("cannot open the work directory %s for the log: %s", wd,
			       strerror(-dirfd));
			return dirfd;
		}
	}
	/* No link is followed and nothing is truncated before it is known to be amber's
	 * own: the work directory may be the image owner's (restore as root). */
	fd = sys_openat2(dirfd, o->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600,
			 RESOLVE_NO_SYMLINKS);
	if (dirfd >= 0)
		close(dirfd);
	if (fd < 0) {
		pr_err("cannot open the log file %s%s%s: %s%s",
		       wd && o->log_file[0] != '/' ? wd : "",
		       wd && o->log_file[0] != '/' ? "/" : "", o->log_file, strerror(-fd),
		       fd == -ELOOP ? " (a symbolic link on its path: give a path without one)"
				    : "");
		return fd;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid()) {
		pr_err("the log file %s is not amber's to write (not a regular file of uid %u with "
		       "one link); remove it or give another -o",
		       o->log_file, (unsigned)geteuid());
		close(fd);
		return -EPERM;
	}
	if (ftruncate(fd, 0)) {
		ret = -errno;
		pr_err("cannot truncate the log file %s: %m", o->log_file);
		close(fd);
		return ret;
	}
	log_fd = fd;
	return 0;
}
