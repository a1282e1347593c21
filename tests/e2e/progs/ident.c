// SPDX-License-Identifier: MIT
/*
 * ident: who the process is.
 *
 *   ident DIR          comm, rlimits (NOFILE, CORE, STACK lowered), personality
 *                      (ADDR_NO_RANDOMIZE|UNAME26: uname() must still say 2.6.x), PR_SET_DUMPABLE
 *                      0, no_new_privs, pdeath signal, timer slack.  Runs as root.
 *   ident DIR creds    the same, then drops to distinct real/effective/saved ids
 *                      (uid 2001/2002/2003, gid 1001/1002/1003, groups 1004 1005 65534); the
 *                      prctl values are set after the switch (it resets them) and dumpable is
 *                      set back to 1 (the switch leaves it 0).
 *
 * The work dir must be writable by uid 2002 in creds mode (run.sh makes it 0777).
 */
#include <grp.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "prog.h"

#define PERS  (PER_LINUX | ADDR_NO_RANDOMIZE | UNAME26)
#define SLACK 123457UL

static const struct {
	int res;
	const char *name;
	struct rlimit lim;
} lims[] = {
	{RLIMIT_NOFILE, "NOFILE", {200, 300}},
	{RLIMIT_CORE, "CORE", {4096, 1 << 20}},
	{RLIMIT_STACK, "STACK", {4 << 20, 16 << 20}},
};

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int creds = argc > first && !strcmp(argv[first], "creds");
	int want_dumpable = creds ? 1 : 0;
	gid_t groups[] = {1004, 1005, 65534}, g[32];
	uid_t r, e, s;
	gid_t rg, eg, sg;
	struct utsname u;
	char comm[32] = "";
	pid_t pid = getpid();
	int i, n, v;

	signal(SIGUSR2, SIG_IGN);
	if (prctl(PR_SET_NAME, "amber-ident"))
		prog_die("PR_SET_NAME");
	for (i = 0; i < 3; i++)
		if (setrlimit(lims[i].res, &lims[i].lim))
			prog_die("setrlimit %s", lims[i].name);
	if (personality(PERS) == -1)
		prog_die("personality");
	if (creds) {
		if (setgroups(3, groups) || setresgid(1001, 1002, 1003) ||
		    setresuid(2001, 2002, 2003))
			prog_die("dropping credentials");
	}
	if (prctl(PR_SET_DUMPABLE, want_dumpable) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_PDEATHSIG, SIGUSR2) || prctl(PR_SET_TIMERSLACK, SLACK))
		prog_die("prctl");

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		prctl(PR_SET_TIMERSLACK, SLACK + 1);

	CHECK(getpid() == pid, "pid %d (expected %d)", (int)getpid(), (int)pid);
	prctl(PR_GET_NAME, comm);
	CHECK(!strcmp(comm, "amber-ident"), "comm \"%s\"", comm);
	for (i = 0; i < 3; i++) {
		struct rlimit l;

		getrlimit(lims[i].res, &l);
		CHECK(l.rlim_cur == lims[i].lim.rlim_cur && l.rlim_max == lims[i].lim.rlim_max,
		      "RLIMIT_%s %lu/%lu (expected %lu/%lu)", lims[i].name,
		      (unsigned long)l.rlim_cur, (unsigned long)l.rlim_max,
		      (unsigned long)lims[i].lim.rlim_cur, (unsigned long)lims[i].lim.rlim_max);
	}
	v = personality(0xffffffff);
	CHECK(v == PERS, "personality %#x (expected %#x)", v, PERS);
	uname(&u);
	CHECK(!strncmp(u.release, "2.6.", 4), "UNAME26 in effect: uname release %s", u.release);
	v = prctl(PR_GET_DUMPABLE);
	CHECK(v == want_dumpable, "dumpable %d (expected %d)", v, want_dumpable);
	v = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	CHECK(v == 1, "no_new_privs %d", v);
	prctl(PR_GET_PDEATHSIG, &v);
	CHECK(v == SIGUSR2, "pdeath signal %d (expected %d)", v, SIGUSR2);
	v = prctl(PR_GET_TIMERSLACK);
	CHECK((unsigned long)v == SLACK, "timer slack %d ns (expected %lu)", v, SLACK);

	getresuid(&r, &e, &s);
	getresgid(&rg, &eg, &sg);
	n = getgroups(32, g);
	if (creds) {
		CHECK(r == 2001 && e == 2002 && s == 2003, "uids %u %u %u", r, e, s);
		CHECK(rg == 1001 && eg == 1002 && sg == 1003, "gids %u %u %u", rg, eg, sg);
		CHECK(n == 3 && g[0] == 1004 && g[1] == 1005 && g[2] == 65534,
		      "groups (%d): %u %u %u", n, n > 0 ? g[0] : 0, n > 1 ? g[1] : 0,
		      n > 2 ? g[2] : 0);
		CHECK(!strcmp(prog_status_field("CapEff"), "0000000000000000") &&
			      !strcmp(prog_status_field("CapPrm"), "0000000000000000"),
		      "no capabilities: CapEff %s", prog_status_field("CapEff"));
		CHECK(setresuid(-1, 0, -1) == -1, "cannot become root again");
	} else {
		CHECK(r == 0 && e == 0 && s == 0 && rg == 0 && eg == 0 && sg == 0,
		      "root: uids %u %u %u gids %u %u %u", r, e, s, rg, eg, sg);
	}
	return prog_done();
}
