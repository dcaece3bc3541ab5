// A process of a compromised DockerSandbox container, for docker-sandbox-attacks.test.mjs.
// Built statically on the host (the test image has no compiler) and copied into the
// container. What it does and gets is written to a record file the test reads.
//
//   docker-tenant-peer fake-keeper <record>
//     Stands in for the sandbox's keeper: listens where the container's PID 1 listens (its
//     `--listen` argument), or else where a local engine's host used to reach it, answers
//     each connection as the keeper would (its ready byte), records every byte received
//     and answers each command request with a forged success.
//   docker-tenant-peer connect-and-exit <record> <command>
//     Drives the keeper as if it were the host: a child connects to PID 1's listener and
//     exits at once (no /proc entry left for the keeper to look at), and this process then
//     sends a command request on that connection, with the connection itself as the
//     command's stdin (so that the command keeps it open). Retried for a few seconds.
//   docker-tenant-peer set-file-caps <file>
//     Gives <file> the file capabilities cap_setuid,cap_setgid+ep (what `setcap` does; the
//     test image has no setcap), printing "set" or why not.
//   docker-tenant-peer file-caps <file>
//     Prints "none" when <file> has no file capabilities, else "present" (run on the host).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static FILE *record;

static void note(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfprintf(record, format, args);
  va_end(args);
  fflush(record);
}

/* The address the container's PID 1 listens on (the argument after `--listen`), or NULL. */
static char *listen_target(void) {
  static char cmdline[8192];
  int fd = open("/proc/1/cmdline", O_RDONLY);
  if (fd < 0) return NULL;
  ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
  close(fd);
  if (n <= 0) return NULL;
  cmdline[n] = 0;
  for (char *arg = cmdline; arg < cmdline + n; arg += strlen(arg) + 1) {
    if (strcmp(arg, "--listen") == 0 && arg + strlen(arg) + 1 < cmdline + n) return arg + strlen(arg) + 1;
  }
  return NULL;
}

/* `@name` is an abstract address, anything else a path. */
static socklen_t address_of(const char *target, struct sockaddr_un *address) {
  memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  size_t room = sizeof address->sun_path - 1;
  if (target[0] == '@') {
    size_t n = strnlen(target + 1, room);
    memcpy(address->sun_path + 1, target + 1, n);
    return offsetof(struct sockaddr_un, sun_path) + 1 + n;
  }
  strncpy(address->sun_path, target, room);
  return sizeof *address;
}

/* Waits up to `ms` for `fd` to be readable; then reads what is there (0 at its end, -1 if nothing came). */
static ssize_t read_within(int fd, char *buf, size_t size, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0) return -1;
  return read(fd, buf, size);
}

static int fake_keeper(const char *record_path) {
  record = fopen(record_path, "w");
  if (!record) return 2;
  const char *target = listen_target();
  if (!target) target = "/.native-workspace/keeper.sock";
  struct sockaddr_un address;
  socklen_t length = address_of(target, &address);
  int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  if (target[0] != '@' && unlink(target) != 0 && errno != ENOENT) note("cannot remove %s: %s\n", target, strerror(errno));
  if (bind(listener, (struct sockaddr *)&address, length) != 0 || listen(listener, 16) != 0) {
    note("cannot listen on %s: %s\n", target, strerror(errno));
    return 1;
  }
  if (target[0] != '@') chmod(target, 0666);
  note("listening on %s\n", target);
  for (;;) {
    int connection = accept(listener, NULL, NULL);
    if (connection < 0) continue;
    note("accepted a connection\n");
    /* The keeper's ready byte. */
    if (write(connection, "R", 1) != 1) continue;
    for (;;) {
      char buf[65536];
      union {
        struct cmsghdr header;
        char space[CMSG_SPACE(8 * sizeof(int))];
      } control;
      struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
      struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
      ssize_t n = recvmsg(connection, &message, 0);
      if (n <= 0) break;
      note("received %zd bytes:\n", n);
      fwrite(buf, 1, n, record);
      note("\n");
      struct cmsghdr *header = CMSG_FIRSTHDR(&message);
      if (!header || header->cmsg_type != SCM_RIGHTS) continue;
      int count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int *fds = (int *)CMSG_DATA(header);
      /* A command request: its control socket, stdout and stderr first. Whatever it asked, it "succeeded". */
      if (count >= 3) {
        dprintf(fds[1], "forged\n");
        dprintf(fds[0], "P1\nX0\n");
      }
      for (int i = 0; i < count; i++) close(fds[i]);
    }
    close(connection);
  }
}

/* One try: a connection made by a child that is gone (and reaped) before anything is sent on it. */
static int connection_of_a_gone_child(const struct sockaddr_un *address, socklen_t length) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(s, (const struct sockaddr *)address, length) != 0) _exit(1);
    char byte = 0;
    union {
      struct cmsghdr header;
      char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &s, sizeof(int));
    sendmsg(pair[1], &message, 0);
    _exit(0);
  }
  close(pair[1]);
  char byte;
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(sizeof(int))];
  } control;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
  int s = -1;
  if (recvmsg(pair[0], &message, 0) == 1) {
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    if (header && header->cmsg_type == SCM_RIGHTS) memcpy(&s, CMSG_DATA(header), sizeof(int));
  }
  close(pair[0]);
  waitpid(child, NULL, 0);
  return s;
}

static int connect_and_exit(const char *record_path, const char *command) {
  record = fopen(record_path, "w");
  if (!record) return 2;
  const char *target = listen_target();
  if (!target) {
    note("no listener in the container\n");
    return 0;
  }
  struct sockaddr_un address;
  socklen_t length = address_of(target, &address);
  time_t until = time(NULL) + 8;
  for (int attempt = 1; time(NULL) < until; attempt++) {
    int s = connection_of_a_gone_child(&address, length);
    if (s < 0) {
      note("attempt %d: cannot connect to %s\n", attempt, target);
      usleep(100000);
      continue;
    }
    char greeting[256];
    ssize_t n = read_within(s, greeting, sizeof greeting, 1000);
    note("attempt %d: greeting of %zd bytes%s\n", attempt, n, n > 0 && greeting[0] == 'R' ? " (ready)" : "");
    if (n == 0) {
      close(s);
      continue;
    }
    /* A command request as the host frames it: length, then `cwd \0 command`; its control
       socket, stdout and stderr attached, and the connection itself as its stdin. */
    int ctl[2], out[2], err[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, ctl) != 0 || pipe(out) != 0 || pipe(err) != 0) return 2;
    char payload[4096];
    size_t size = (size_t)snprintf(payload + 4, sizeof payload - 4, "/%c%s", 0, command);
    uint32_t le = (uint32_t)size;
    memcpy(payload, &le, 4);
    int fds[4] = {ctl[1], out[1], err[1], s};
    union {
      struct cmsghdr header;
      char space[CMSG_SPACE(sizeof fds)];
    } control;
    struct iovec iov = {.iov_base = payload, .iov_len = 4 + size};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(header), fds, sizeof fds);
    if (sendmsg(s, &message, MSG_NOSIGNAL) < 0) note("attempt %d: cannot send: %s\n", attempt, strerror(errno));
    close(ctl[1]);
    close(out[1]);
    close(err[1]);
    char lines[256];
    n = read_within(ctl[0], lines, sizeof lines - 1, 1000);
    if (n > 0) {
      lines[n] = 0;
      note("attempt %d: control %s", attempt, lines);
      if (lines[0] == 'P') return 0;
    } else {
      note("attempt %d: no control line\n", attempt);
    }
    close(ctl[0]);
    close(out[0]);
    close(err[0]);
    close(s);
  }
  return 0;
}

/** The kernel's `security.capability` value, revision 2: what `setcap` writes. */
struct file_caps {
  uint32_t magic_etc;
  struct {
    uint32_t permitted;
    uint32_t inheritable;
  } data[2];
};
#define FILE_CAPS_REVISION_2 0x02000000u
#define FILE_CAPS_EFFECTIVE 0x000001u
#define CAP_SETGID_BIT 6
#define CAP_SETUID_BIT 7

static int set_file_caps(const char *file) {
  struct file_caps caps = {.magic_etc = FILE_CAPS_REVISION_2 | FILE_CAPS_EFFECTIVE};
  caps.data[0].permitted = (1u << CAP_SETUID_BIT) | (1u << CAP_SETGID_BIT);
  if (setxattr(file, "security.capability", &caps, sizeof caps, 0) != 0) {
    printf("set-file-caps: %s\n", strerror(errno));
    return 1;
  }
  printf("set\n");
  return 0;
}

static int file_caps(const char *file) {
  struct file_caps caps;
  ssize_t n = getxattr(file, "security.capability", &caps, sizeof caps);
  if (n < 0 && errno != ENODATA) {
    printf("file-caps: %s\n", strerror(errno));
    return 1;
  }
  printf(n < 0 ? "none\n" : "present\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "fake-keeper") == 0) return fake_keeper(argv[2]);
  if (argc == 4 && strcmp(argv[1], "connect-and-exit") == 0) return connect_and_exit(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "set-file-caps") == 0) return set_file_caps(argv[2]);
  if (argc == 3 && strcmp(argv[1], "file-caps") == 0) return file_caps(argv[2]);
  fprintf(stderr, "usage: %s fake-keeper <record> | connect-and-exit <record> <command> | set-file-caps <file> | file-caps <file>\n", argv[0]);
  return 2;
}
