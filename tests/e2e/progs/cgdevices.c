// SPDX-License-Identifier: MIT
/*
 * cgdevices: a process (ready at once) the test moves into a devices cgroup that allows
 * /dev/null (rw) and /dev/zero (read) only, then writes "moved".  It checks
 * the devices it may open before the dump and again after the restore:
 * /dev/null read-write and /dev/zero read-only open; /dev/zero for writing
 * and /dev/full do not (EPERM).  A restore that made the cgroup again with
 * its parent's wider list lets them open.
 */
#include "prog.h"

static const struct {
	const char *path;
	int flags;
	int allowed;
} devs[] = {
	{"/dev/null", O_RDWR, 1},
	{"/dev/zero", O_RDONLY, 1},
	{"/dev/zero", O_WRONLY, 0},
	{"/dev/full", O_RDWR, 0},
};

static void check_devices(const char *when, int flip)
{
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		int fd = open(devs[i].path, devs[i].flags | O_CLOEXEC);
		int e = errno, want = devs[i].allowed ^ (i == 3 && flip);

		if (fd >= 0)
			close(fd);
		CHECK(want ? fd >= 0 : fd < 0 && e == EPERM, "%s: %s (%s) %s", when, devs[i].path,
		      devs[i].flags == O_RDONLY	  ? "read"
		      : devs[i].flags == O_WRONLY ? "write"
						  : "rw",
		      fd >= 0 ? "opens" : strerror(e));
	}
}

int main(int argc, char **argv)
{
	prog_init(argc, argv);
	prog_ready();
	for (int i = 0; i < 3000 && access(prog_path("moved"), F_OK); i++)
		usleep(10 * 1000);
	check_devices("before the dump", 0);
	prog_write_atomic("seen", "1\n");
	prog_wait_go();
	check_devices("after the restore", prog_sabotage());
	return prog_done();
}
