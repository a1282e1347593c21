// SPDX-License-Identifier: MIT
/*
 * System V IPC: three shared memory segments (A: keyed, locked, attached
 * read-write with part of it mprotect'ed read-only and again SHM_RDONLY,
 * inherited by a child; B: attached and removed, SHM_DEST; C: detached,
 * created by us), a keyed semaphore set and a keyed message queue with three
 * messages of different types and a lowered size limit.  After the restore
 * every object must have its id (the program uses the ids it had), key,
 * owner, mode, size, flags and contents; the semaphores their values, the
 * queue its messages in order; the child writes into A and we must see it
 * through our read-only attach.  DIR/ipc-ids lists the ids for the test.
 */
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>

#include "prog.h"

#define PAGE	 4096
#define A_SIZE	 (3 * PAGE + 100)
#define B_SIZE	 PAGE
#define C_SIZE	 (2 * PAGE)
#define NSEMS	 5
#define CHILD_X	 0x5eed0000c0ffeeULL
#define CHILD_AT (3 * PAGE + 104) /* past the bytes checked */

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

struct msg {
	long type;
	char text[64];
};

static const struct {
	long type;
	const char *text;
} msgs[] = {{1, "first"}, {5, "the second message, longer"}, {2, "third"}};

static int shm_a, shm_b, shm_c, sem, msq, go2[2];
static char *a1, *a2, *b1;

static void sysv_maps(char *out, size_t size)
{
	static char buf[1 << 16];
	size_t n = 0;

	prog_read_file("/proc/self/maps", buf, sizeof(buf));
	out[0] = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, "/SYSV"))
			n += snprintf(out + n, size - n, "%s\n", l);
}

static void setup(void)
{
	key_t base = 0x41000000 | (getpid() & 0xffffff) << 4;
	unsigned short vals[NSEMS] = {3, 0, 7, 32767, 1};
	/* SYSV_UNDO=1: with an undo list, which amber must refuse */
	struct sembuf op = {1, 2, getenv("SYSV_UNDO") ? SEM_UNDO : 0};
	struct msqid_ds mds;
	char *c1;
	FILE *f;

	shm_a = shmget(base + 1, A_SIZE, IPC_CREAT | IPC_EXCL | 0640);
	shm_b = shmget(IPC_PRIVATE, B_SIZE, IPC_CREAT | 0600);
	shm_c = shmget(IPC_PRIVATE, C_SIZE, IPC_CREAT | 0606);
	if (shm_a < 0 || shm_b < 0 || shm_c < 0)
		prog_die("shmget");
	a1 = shmat(shm_a, NULL, 0);
	a2 = shmat(shm_a, NULL, SHM_RDONLY);
	b1 = shmat(shm_b, NULL, 0);
	c1 = shmat(shm_c, NULL, 0);
	if (a1 == (void *)-1 || a2 == (void *)-1 || b1 == (void *)-1 || c1 == (void *)-1)
		prog_die("shmat");
	prog_fill(a1, A_SIZE & ~7, 0xa);
	prog_fill(b1, B_SIZE, 0xb);
	prog_fill(c1, C_SIZE, 0xc);
	/* one attach, three VMAs */
	if (mprotect(a1 + PAGE, PAGE, PROT_READ) || shmctl(shm_a, SHM_LOCK, NULL) ||
	    shmctl(shm_b, IPC_RMID, NULL) || shmdt(c1))
		prog_die("mprotect/SHM_LOCK/IPC_RMID/shmdt");

	sem = semget(base + 2, NSEMS, IPC_CREAT | IPC_EXCL | 0660);
	if (sem < 0 || semctl(sem, 0, SETALL, (union semun){.array = vals}) || semop(sem, &op, 1))
		prog_die("semget/SETALL/semop");

	msq = msgget(base + 3, IPC_CREAT | IPC_EXCL | 0620);
	if (msq < 0)
		prog_die("msgget");
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct msg m = {msgs[i].type, ""};

		snprintf(m.text, sizeof(m.text), "%s", msgs[i].text);
		if (msgsnd(msq, &m, strlen(m.text) + 1, 0))
			prog_die("msgsnd");
	}
	if (msgctl(msq, IPC_STAT, &mds))
		prog_die("IPC_STAT");
	mds.msg_qbytes = 4000;
	if (msgctl(msq, IPC_SET, &mds))
		prog_die("IPC_SET");

	f = fopen(prog_path("ipc-ids"), "w");
	if (!f)
		prog_die("ipc-ids");
	fprintf(f, "shm %d %d %d\nsem %d\nmsg %d\n", shm_a, shm_b, shm_c, sem, msq);
	fclose(f);
}

static int same_perm(const struct ipc_perm *a, const struct ipc_perm *b)
{
	return a->__key == b->__key && a->uid == b->uid && a->gid == b->gid && a->cuid == b->cuid &&
	       a->cgid == b->cgid && a->mode == b->mode;
}

static int child(void)
{
	volatile uint64_t *x = (volatile uint64_t *)(a1 + CHILD_AT);
	struct sembuf op = {4, -1, IPC_NOWAIT};
	int bad = 0;
	char c;

	/* once the parent has counted the attaches */
	close(go2[1]);
	if (read(go2[0], &c, 1) != 1)
		return 1;
	bad |= prog_verify(a2, PAGE, 0xa) >= 0;
	*x = CHILD_X;
	bad |= semop(sem, &op, 1) != 0;
	return bad;
}

static void check_shm(const struct shmid_ds *before, int id, const char *name)
{
	struct shmid_ds ds;

	CHECK(shmctl(id, IPC_STAT, &ds) == 0, "segment %s: id %d still names it", name, id);
	CHECK(same_perm(&ds.shm_perm, &before->shm_perm),
	      "segment %s: key %#x, owner %u/%u, creator %u/%u, mode %#o as before (%#x %u/%u "
	      "%u/%u %#o)",
	      name, ds.shm_perm.__key, ds.shm_perm.uid, ds.shm_perm.gid, ds.shm_perm.cuid,
	      ds.shm_perm.cgid, ds.shm_perm.mode, before->shm_perm.__key, before->shm_perm.uid,
	      before->shm_perm.gid, before->shm_perm.cuid, before->shm_perm.cgid,
	      before->shm_perm.mode);
	CHECK(ds.shm_segsz == before->shm_segsz && ds.shm_nattch == before->shm_nattch,
	      "segment %s: %zu bytes, %lu attaches (before: %zu, %lu)", name, ds.shm_segsz,
	      (unsigned long)ds.shm_nattch, before->shm_segsz, (unsigned long)before->shm_nattch);
}

int main(int argc, char **argv)
{
	struct shmid_ds sa, sb, sc;
	struct msqid_ds mds;
	unsigned short vals[NSEMS], want[NSEMS] = {3, 2, 7, 32767, 1};
	static char maps_before[8192], maps_after[8192];
	int status;
	pid_t kid;
	char *c1;

	prog_init(argc, argv);
	setup();
	if (pipe(go2))
		prog_die("pipe");
	kid = fork();
	if (kid < 0)
		prog_die("fork");
	if (!kid)
		_exit(child());
	if (shmctl(shm_a, IPC_STAT, &sa) || shmctl(shm_b, IPC_STAT, &sb) ||
	    shmctl(shm_c, IPC_STAT, &sc))
		prog_die("IPC_STAT");
	sysv_maps(maps_before, sizeof(maps_before));
	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		semctl(sem, 2, SETVAL, (union semun){.val = 8});
	check_shm(&sa, shm_a, "A");
	check_shm(&sb, shm_b, "B");
	check_shm(&sc, shm_c, "C");
	CHECK((sa.shm_perm.mode & SHM_LOCKED) && (sb.shm_perm.mode & SHM_DEST) &&
		      !sb.shm_perm.__key,
	      "A is locked, B removed (SHM_DEST, key 0) as before");
	sysv_maps(maps_after, sizeof(maps_after));
	CHECK(!strcmp(maps_before, maps_after), "the /SYSV mappings are the same:\n%s---\n%s",
	      maps_before, maps_after);
	CHECK(prog_verify(a1, A_SIZE & ~7, 0xa) < 0 && prog_verify(a2, A_SIZE & ~7, 0xa) < 0,
	      "segment A's bytes, through both attaches");
	CHECK(prog_verify(b1, B_SIZE, 0xb) < 0, "segment B's bytes");
	c1 = shmat(shm_c, NULL, SHM_RDONLY);
	CHECK(c1 != (void *)-1 && prog_verify(c1, C_SIZE, 0xc) < 0,
	      "segment C (not attached at the dump) attaches again with its bytes");
	if (c1 != (void *)-1)
		shmdt(c1);

	memset(vals, 0, sizeof(vals));
	status = semctl(sem, 0, GETALL, (union semun){.array = vals});
	CHECK(status == 0 && !memcmp(vals, want, sizeof(want)), "semaphores %d %d %d %d %d",
	      vals[0], vals[1], vals[2], vals[3], vals[4]);
	status = msgctl(msq, IPC_STAT, &mds);
	CHECK(status == 0 && mds.msg_qnum == 3 && mds.msg_qbytes == 4000,
	      "message queue: %lu messages, limit %lu bytes", (unsigned long)mds.msg_qnum,
	      (unsigned long)mds.msg_qbytes);
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct msg m = {0, ""};
		ssize_t n = msgrcv(msq, &m, sizeof(m.text), 0, IPC_NOWAIT);

		CHECK(n == (ssize_t)strlen(msgs[i].text) + 1 && m.type == msgs[i].type &&
			      !strcmp(m.text, msgs[i].text),
		      "message %zu: type %ld \"%s\"", i + 1, m.type, n > 0 ? m.text : "");
	}

	if (write(go2[1], "g", 1) != 1)
		prog_die("write");
	CHECK(waitpid(kid, &status, 0) == kid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the child saw A and changed a semaphore (status %#x)", status);
	CHECK(*(volatile uint64_t *)(a2 + CHILD_AT) == CHILD_X,
	      "the child's store into A shows in our read-only attach");
	status = semctl(sem, 4, GETVAL);
	CHECK(status == 0, "the child's semop took semaphore 4 to 0");

	shmctl(shm_a, IPC_RMID, NULL);
	shmctl(shm_c, IPC_RMID, NULL);
	semctl(sem, 0, IPC_RMID);
	msgctl(msq, IPC_RMID, NULL);
	return prog_done();
}
