// SPDX-License-Identifier: MIT
/*
 * amber show: an image written here is printed as JSON that jq parses, with
 * every field in place (scalars, enums by name, bytes as hex, strings
 * escaped, optional fields only when set), and incomplete or damaged images
 * still give valid JSON and exit status 1.  Also checks that the output of
 * `amber check --json` is valid JSON that agrees with the exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "amber.h"
#include "image.h"
#include "log.h"
#include "sys.h"
#include "unit.h"

#define PID 4242

struct fixture {
	char dir[64];
	char out[96]; /* JSON output file */
	int dirfd;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	fx->dirfd = unit_mkdir(fx->dir);
	if (fx->dirfd < 0)
		return -1;
	snprintf(fx->out, sizeof(fx->out), "%s.json", fx->dir);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	close(fx->dirfd);
	if (unit_remove(fx->dir, fx->out))
		return -1;
	free(fx);
	return 0;
}

/* pstree.img: PID, and with with_tree its CLONE_VM child PID + 1 (a copy of core) */
static bool with_tree;

static void write_tree(struct img_set *set, TaskCore core)
{
	PstreeEntry e[2];
	struct img *img;
	char name[64];
	int n = with_tree ? 2 : 1;

	assert_int_equal(img_create(set, IMG_PSTREE, &img, "pstree.img"), 0);
	for (int i = 0; i < n; i++) {
		pstree_entry__init(&e[i]);
		e[i].pid = PID + i;
		e[i].ppid = i ? PID : 1;
		e[i].pgid = e[i].sid = PID;
	}
	e[1].has_clone_vm = e[1].clone_vm = 1;
	e[1].has_clone_sighand = e[1].clone_sighand = 1;
	for (int i = 0; i < n; i++)
		assert_int_equal(img_put(img, &e[i].base), 0);
	assert_int_equal(img_finish(img), 0);
	if (!with_tree)
		return;
	core.pid = PID + 1;
	core.ppid = PID;
	core.comm = "vmchild";
	snprintf(name, sizeof(name), "core-%d.img", PID + 1);
	assert_int_equal(unit_put_one(set, IMG_CORE, name, &core.base), 0);
}

static void write_image(struct fixture *fx)
{
	static uint8_t xsave[] = {0x00, 0xff, 0x10, 0xab};
	static uint64_t auxv[] = {6, 4096, 0, 0};
	static uint32_t groups[] = {0, 27};
	static uint8_t page[4096];
	struct img_set set = {.dirfd = fx->dirfd};
	SigactionEntry sa, *sas[] = {&sa};
	PagemapEntry pm[2], *pms[] = {&pm[0], &pm[1]};
	VmaEntry vma, *vmas[] = {&vma};
	RegFile rf[2];
	FdEntry fd;
	TaskCore core;
	UserRegs regs;
	Creds creds;
	Inventory inv;
	MmEntry mm;
	FsEntry fs;
	struct img *img;
	char name[64];

	user_regs__init(&regs);
	regs.ip = 0x401000;
	regs.sp = 0x7ffffffde000ULL;
	regs.ax = UINT64_MAX; /* the largest uint64 */
	creds__init(&creds);
	creds.uid = 1000;
	creds.n_groups = 2;
	creds.groups = groups;
	creds.cap_bnd = 0x1ffffffffffULL;
	sigaction_entry__init(&sa);
	sa.sig = 10;
	sa.handler = 0x401234;
	task_core__init(&core);
	core.pid = PID;
	core.ppid = 1;
	core.comm = "we\"ird\\na\tme\n\x01";
	core.regs = &regs;
	core.xsave.data = xsave;
	core.xsave.len = sizeof(xsave);
	core.n_sigactions = 1;
	core.sigactions = sas;
	core.creds = &creds;
	core.nice = -5;
	core.oom_score_adj = -1000;
	core.has_rseq_addr = 1; /* optional and set; the other optionals are not */
	core.rseq_addr = 0;
	snprintf(name, sizeof(name), "core-%d.img", PID);
	assert_int_equal(unit_put_one(&set, IMG_CORE, name, &core.base), 0);

	vma_entry__init(&vma);
	vma.start = 0x400000;
	vma.end = 0x401000;
	vma.prot = 5;
	vma.kind = VMA_KIND__VMA_FILE_PRIVATE;
	vma.has_file_id = 1;
	vma.file_id = 1;
	mm_entry__init(&mm);
	mm.start_code = 0x400000;
	mm.n_auxv = 4;
	mm.auxv = auxv;
	mm.n_vmas = 1;
	mm.vmas = vmas;
	snprintf(name, sizeof(name), "mm-%d.img", PID);
	assert_int_equal(unit_put_one(&set, IMG_MM, name, &mm.base), 0);

	snprintf(name, sizeof(name), "pagemap-%d.img", PID);
	assert_int_equal(img_create(&set, IMG_PAGEMAP, &img, "%s", name), 0);
	for (int i = 0; i < 2; i++) {
		pagemap_entry__init(pms[i]);
		pm[i].vaddr = 0x600000 + i * 0x2000;
		pm[i].nr_pages = 1;
		pm[i].offset = i * 4096;
		assert_int_equal(img_put(img, &pm[i].base), 0);
	}
	assert_int_equal(img_finish(img), 0);
	/* their pages: every run of pagemap holds at least one */
	snprintf(name, sizeof(name), "pages-%d.img", PID);
	assert_int_equal(img_create(&set, IMG_PAGES, &img, "%s", name), 0);
	assert_int_equal(img_write(img, page, PAGES_DATA_OFF - IMG_HDR_SIZE), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(img_write(img, page, sizeof(page)), 0);
	assert_int_equal(img_finish(img), 0);

	fd_entry__init(&fd);
	fd.fd = 3;
	fd.file_id = 0;
	fd.cloexec = 1;
	snprintf(name, sizeof(name), "fds-%d.img", PID);
	assert_int_equal(unit_put_one(&set, IMG_FDS, name, &fd.base), 0);

	fs_entry__init(&fs);
	fs.cwd = "/tmp/\xc3\xa9t\xc3\xa9"; /* UTF-8 */
	fs.root = "/bad\xff\xfe";	   /* not UTF-8: must still be valid JSON */
	snprintf(name, sizeof(name), "fs-%d.img", PID);
	assert_int_equal(unit_put_one(&set, IMG_FS, name, &fs.base), 0);
	for (int i = 1; with_tree && i < 2; i++) { /* the child's own fds and fs */
		snprintf(name, sizeof(name), "fds-%d.img", PID + i);
		assert_int_equal(unit_put_one(&set, IMG_FDS, name, &fd.base), 0);
		snprintf(name, sizeof(name), "fs-%d.img", PID + i);
		assert_int_equal(unit_put_one(&set, IMG_FS, name, &fs.base), 0);
	}

	assert_int_equal(img_create(&set, IMG_FILES, &img, "files.img"), 0);
	reg_file__init(&rf[0]);
	rf[0].id = 0;
	rf[0].kind = FILE_KIND__FILE_PIPE;
	rf[0].path = "pipe:[1234]";
	rf[0].has_pipe_id = 1;
	rf[0].pipe_id = 1234;
	rf[0].has_pipe_data = 1;
	rf[0].pipe_data.data = (uint8_t *)"hi\n";
	rf[0].pipe_data.len = 3;
	reg_file__init(&rf[1]);
	rf[1].id = 1;
	rf[1].kind = FILE_KIND__FILE_REG;
	rf[1].path = "/usr/bin/prog";
	rf[1].ghost = "ghost-1.img";
	for (int i = 0; i < 2; i++)
		assert_int_equal(img_put(img, &rf[i].base), 0);
	assert_int_equal(img_finish(img), 0);

	write_tree(&set, core);
	inventory__init(&inv);
	inv.image_version = IMG_VERSION;
	inv.root_pid = PID;
	inv.kernel = "6.18.0-test";
	inv.dump_time_ns = 1764720000000000000ULL;
	inv.xsave_size = 4;
	inv.tool_version = AMBER_VERSION;
	assert_int_equal(img_set_commit(&set, &inv), 0);
	img_set_free(&set);
}

/* cmd_show with stdout sent to fx->out; returns its exit status. */
static int run_show(struct fixture *fx)
{
	char *argv[] = {"show", fx->dir, NULL};
	int saved, fd, ret;

	fflush(stdout);
	saved = dup(1);
	fd = open(fx->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 1);
	close(fd);
	ret = cmd_show(2, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	return ret;
}

/* jq -e FILTER on the output: true when it parses and the filter holds. */
static bool jq(struct fixture *fx, const char *filter)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "jq -e '%s' '%s' >/dev/null", filter, fx->out);
	if (system(cmd) != 0) {
		print_message("jq filter failed: %s\n", filter);
		return false;
	}
	return true;
}

static void test_show_full(void **state)
{
	struct fixture *fx = *state;

	write_image(fx);
	assert_int_equal(run_show(fx), 0);
	assert_true(jq(fx, "."));
	assert_true(jq(fx, "keys == [\"files\", \"inventory\", \"pstree\", \"tasks\", "
			   "\"verified\"]"));
	assert_true(jq(fx, ".verified == true"));
	/* inventory, with its file list (a nested repeated message) */
	assert_true(jq(fx, ".inventory.root_pid == 4242 and .inventory.kernel == \"6.18.0-test\""));
	assert_true(jq(fx, ".inventory.tool_version == \"" AMBER_VERSION "\""));
	assert_true(jq(fx, ".inventory.dump_time_ns == 1764720000000000000"));
	assert_true(jq(fx, ".inventory.shell_job == false"));
	assert_true(jq(
		fx, "[.inventory.files[].name] | sort == "
		    "[\"core-4242.img\", \"fds-4242.img\", \"files.img\", \"fs-4242.img\", "
		    "\"mm-4242.img\", \"pagemap-4242.img\", \"pages-4242.img\", \"pstree.img\"]"));
	assert_true(jq(fx, ".inventory.files | all(.size > 8 and (.xxh3 | type) == \"number\")"));
	/* one task with every part */
	assert_true(jq(fx, ".tasks | length == 1"));
	assert_true(jq(fx, ".tasks[0] | keys == [\"core\", \"fds\", \"fs\", \"mm\", \"pagemap\", "
			   "\"pid\", \"threads\"]"));
	/* a process of one thread: no threads file, no other thread's core */
	assert_true(jq(fx, ".tasks[0].threads == []"));
	assert_true(jq(fx, ".tasks[0].pid == 4242 and .tasks[0].core.pid == 4242"));
	/* escaping */
	assert_true(jq(fx, ".tasks[0].core.comm == \"we\\\"ird\\\\na\\tme\\n\\u0001\""));
	/* nested messages, big and negative numbers, bytes as hex, repeated scalars */
	assert_true(jq(fx, ".tasks[0].core.regs.ip == 4198400"));
	assert_true(jq(fx, ".tasks[0].core.regs.ax >= 18446744073709551615"));
	assert_true(jq(fx, ".tasks[0].core.nice == -5 and .tasks[0].core.oom_score_adj == -1000"));
	assert_true(jq(fx, ".tasks[0].core.xsave == \"00ff10ab\""));
	assert_true(jq(fx, ".tasks[0].core.creds.groups == [0, 27]"));
	assert_true(jq(fx, ".tasks[0].core.sigactions == [{\"sig\": 10, \"handler\": 4198964, "
			   "\"flags\": 0, \"restorer\": 0, \"mask\": 0}]"));
	assert_true(jq(fx, ".tasks[0].core.pending == [] and .tasks[0].core.rlimits == []"));
	/* optional fields: only when present, even when the value is 0 */
	assert_true(jq(fx, ".tasks[0].core.rseq_addr == 0"));
	assert_true(jq(fx, ".tasks[0].core | has(\"altstack_sp\") or has(\"stop_signal\") | not"));
	/* enums by name */
	assert_true(jq(fx, ".tasks[0].mm.vmas[0].kind == \"VMA_FILE_PRIVATE\""));
	assert_true(jq(fx, ".tasks[0].mm.vmas[0].file_id == 1"));
	assert_true(jq(fx, ".tasks[0].mm.vmas[0] | has(\"shmem_id\") | not"));
	assert_true(jq(fx, ".tasks[0].mm.auxv == [6, 4096, 0, 0]"));
	assert_true(jq(fx, ".tasks[0].mm | has(\"vdso_syms\") | not"));
	/* many-record files */
	assert_true(jq(fx, "[.tasks[0].pagemap[].vaddr] == [6291456, 6299648]"));
	assert_true(jq(fx, ".tasks[0].fds == [{\"fd\": 3, \"file_id\": 0, \"cloexec\": true}]"));
	/* strings: UTF-8 kept, other bytes escaped */
	assert_true(jq(fx, ".tasks[0].fs.cwd == \"/tmp/\\u00e9t\\u00e9\""));
	assert_true(jq(fx, ".tasks[0].fs.root == \"/bad\\u00ff\\u00fe\""));
	/* files */
	assert_true(jq(fx, "[.files[].kind] == [\"FILE_PIPE\", \"FILE_REG\"]"));
	assert_true(jq(fx, ".files[0].pipe_data == \"68690a\" and .files[0].pipe_id == 1234"));
	assert_true(jq(fx, ".files[1].ghost == \"ghost-1.img\" and (.files[1] | has(\"pipe_id\") "
			   "| not)"));
}

/* Every process of pstree.img; a CLONE_VM child points at its parent's memory. */
static void test_show_tree(void **state)
{
	struct fixture *fx = *state;

	with_tree = true;
	write_image(fx);
	with_tree = false;
	assert_int_equal(run_show(fx), 0);
	assert_true(jq(fx, ".verified == true"));
	assert_true(jq(fx, "[.pstree[].pid] == [4242, 4243]"));
	assert_true(jq(fx, ".pstree[1].clone_vm == true and .pstree[1].clone_sighand == true"));
	assert_true(jq(fx, ".pstree[0] | has(\"clone_vm\") | not"));
	assert_true(jq(fx, "[.tasks[].pid] == [4242, 4243]"));
	assert_true(jq(fx, ".tasks[1].core.comm == \"vmchild\""));
	assert_true(jq(fx, ".tasks[1].mm == {\"shared_with\": 4242}"));
	assert_true(jq(fx, ".tasks[1].pagemap == {\"shared_with\": 4242}"));
	assert_true(jq(fx, ".tasks[0].mm.vmas | length == 1"));
}

static void test_show_no_inventory(void **state)
{
	struct fixture *fx = *state;

	write_image(fx);
	assert_int_equal(unlinkat(fx->dirfd, "inventory.img", 0), 0);
	assert_int_equal(run_show(fx), 1);
	assert_true(jq(fx, ".inventory == null"));
	/* the tasks are found from the core files */
	assert_true(jq(fx, ".tasks | length == 1"));
	assert_true(jq(fx, ".tasks[0].core.comm | startswith(\"we\")"));
	assert_true(jq(fx, ".files | length == 2"));
	assert_true(jq(fx, ".errors | length >= 1"));
	assert_true(jq(fx, "has(\"verified\") | not"));
}

static void test_show_damaged(void **state)
{
	struct fixture *fx = *state;
	char name[64];
	struct stat st;
	int fd;

	write_image(fx);
	/* cut the last pagemap record and remove the mm file */
	snprintf(name, sizeof(name), "pagemap-%d.img", PID);
	fd = openat(fx->dirfd, name, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(ftruncate(fd, st.st_size - 1), 0);
	close(fd);
	snprintf(name, sizeof(name), "mm-%d.img", PID);
	assert_int_equal(unlinkat(fx->dirfd, name, 0), 0);

	assert_int_equal(run_show(fx), 1);
	assert_true(jq(fx, ".verified == false"));
	assert_true(jq(fx, ".tasks[0].mm == null"));
	assert_true(jq(fx, ".tasks[0].pagemap | length == 1"));
	assert_true(jq(fx, ".tasks[0].core.pid == 4242"));
	assert_true(jq(fx, ".errors | length >= 2"));
}

static void test_show_empty_dir(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(run_show(fx), 1);
	assert_true(jq(fx, ".inventory == null and .tasks == [] and .files == null"));
}

static void test_show_usage(void **state)
{
	char *none[] = {"show", NULL};
	char *missing[] = {"show", "/nonexistent/amber-image", NULL};

	assert_int_equal(cmd_show(1, none), 2);
	assert_int_equal(cmd_show(2, missing), 1);
}

/* amber check --json: valid JSON whose verdict matches the exit status. */
static void test_check_json(void **state)
{
	struct fixture *fx = *state;
	char *argv[] = {"check", "--json", NULL};
	char filter[256];
	int saved, fd, ret;

	fflush(stdout);
	saved = dup(1);
	fd = open(fx->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 1);
	close(fd);
	ret = cmd_check(2, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);

	assert_true(ret == 0 || ret == 1);
	assert_true(jq(fx, "(.features | length) > 10"));
	assert_true(jq(fx, ".features | to_entries | all(.value.state == \"present\" or "
			   ".value.state == \"absent\" or .value.state == \"unknown\")"));
	snprintf(filter, sizeof(filter), "(.dump.can_work and .restore.can_work) == %s",
		 ret ? "false" : "true");
	assert_true(jq(fx, filter));
	/* a feature needed by dump that is not present means dump cannot work */
	assert_true(jq(fx, "([.features[] | select((.needed_by | index(\"dump\")) and "
			   ".present == false)] | length > 0) <= (.dump.can_work | not)"));
	/* PR_SET_MM_MAP_SIZE is probed on this very kernel */
	assert_true(jq(fx, ".features[\"prctl-set-mm-map\"].detail | length > 0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_show_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_show_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_show_no_inventory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_show_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_show_empty_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_show_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_json, setup, teardown),
	};

	if (system("jq --version >/dev/null 2>&1")) {
		fprintf(stderr, "test_show needs jq\n");
		return 1;
	}
	log_level = getenv("AMBER_TEST_VERBOSE") ? LOG_DEBUG : -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
