// SPDX-License-Identifier: MIT
/*
 * cmdline: command line, environment and auxiliary vector.
 *
 *   cmdline DIR ARGS...   (run.sh passes spaces, an empty argument, UTF-8, a long one)
 *
 * Like setproctitle(), the program rewrites its first extra argument in place, so
 * /proc/PID/cmdline (read from the process's memory) differs from what exec() got.  After
 * restore, argv[] and environ[] must hold the same strings at the same addresses, and
 * /proc/self/{cmdline,environ,auxv} and /proc/self/stat fields 48-51 (arg_start, arg_end,
 * env_start, env_end) must be byte for byte what they were.  run.sh also compares them
 * from outside, with `ps -o args`.
 */
#include <sys/auxv.h>

#include "prog.h"

#define BIG 65536

struct snap {
	char cmdline[BIG], environ[BIG], auxv[4096];
	ssize_t ncmd, nenv, nauxv;
	unsigned long fields[4]; /* stat 48-51 */
};

static struct snap before, after;

static void take(struct snap *s)
{
	char stat[4096], *p;
	int i;

	s->ncmd = prog_read_file("/proc/self/cmdline", s->cmdline, BIG);
	s->nenv = prog_read_file("/proc/self/environ", s->environ, BIG);
	s->nauxv = prog_read_file("/proc/self/auxv", s->auxv, sizeof(s->auxv));
	prog_read_file("/proc/self/stat", stat, sizeof(stat));
	p = strrchr(stat, ')');	       /* field 2 (comm) may hold anything */
	for (i = 3; p && i <= 48; i++) /* p: the blank before field i */
		p = strchr(p + 1, ' ');
	for (i = 0; i < 4; i++) {
		s->fields[i] = p ? strtoul(p + 1, &p, 10) : 0;
	}
}

int main(int argc, char **argv, char **envp)
{
	int first = prog_init(argc, argv);
	char **argv_copy = calloc(argc, sizeof(char *)), **env_copy;
	char *const *argv_addr = argv;
	unsigned char random_copy[16];
	const char *execfn = (const char *)getauxval(AT_EXECFN);
	char *execfn_copy = strdup(execfn ? execfn : "");
	int i, nenv, bad;

	if (argc > first && argv[first][0])
		argv[first][0] ^= 0x20; /* setproctitle-style rewrite: "arg" -> "Arg" */
	for (i = 0; i < argc; i++)
		argv_copy[i] = strdup(argv[i]);
	for (nenv = 0; envp[nenv]; nenv++)
		;
	env_copy = calloc(nenv + 1, sizeof(char *));
	for (i = 0; i < nenv; i++)
		env_copy[i] = strdup(envp[i]);
	memcpy(random_copy, (void *)getauxval(AT_RANDOM), 16);
	take(&before);

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		argv[0][0] ^= 1;

	for (bad = 0, i = 0; i < argc; i++)
		bad += strcmp(argv[i], argv_copy[i]) != 0;
	CHECK(argv == argv_addr && bad == 0 && argv[argc] == NULL,
	      "argv[0..%d] unchanged (%d differ)", argc - 1, bad);
	for (bad = 0, i = 0; i < nenv; i++)
		bad += strcmp(envp[i], env_copy[i]) != 0;
	CHECK(bad == 0 && envp[nenv] == NULL, "%d environment strings unchanged (%d differ)", nenv,
	      bad);
	CHECK(getenv("AMBER_E2E_MARK") && !strcmp(getenv("AMBER_E2E_MARK"), "cmdline-env-mark"),
	      "getenv(AMBER_E2E_MARK) = %s", getenv("AMBER_E2E_MARK"));

	take(&after);
	CHECK(after.ncmd == before.ncmd && !memcmp(after.cmdline, before.cmdline, before.ncmd),
	      "/proc/self/cmdline unchanged (%zd bytes, before %zd)", after.ncmd, before.ncmd);
	CHECK(after.nenv == before.nenv && !memcmp(after.environ, before.environ, before.nenv),
	      "/proc/self/environ unchanged (%zd bytes, before %zd)", after.nenv, before.nenv);
	CHECK(after.nauxv == before.nauxv && !memcmp(after.auxv, before.auxv, before.nauxv),
	      "/proc/self/auxv unchanged (%zd bytes, before %zd)", after.nauxv, before.nauxv);
	for (i = 0; i < 4; i++)
		CHECK(after.fields[i] == before.fields[i] && before.fields[i],
		      "/proc/self/stat field %d = %#lx (before %#lx)", 48 + i, after.fields[i],
		      before.fields[i]);
	CHECK(getauxval(AT_PAGESZ) == 4096, "AT_PAGESZ %lu", getauxval(AT_PAGESZ));
	CHECK(!memcmp((void *)getauxval(AT_RANDOM), random_copy, 16), "AT_RANDOM bytes unchanged");
	CHECK(getauxval(AT_EXECFN) && !strcmp((char *)getauxval(AT_EXECFN), execfn_copy),
	      "AT_EXECFN %s", execfn_copy);
	return prog_done();
}
