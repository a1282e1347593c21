// SPDX-License-Identifier: MIT
// The JVM row of bench/run.sh: java Threads N DIR starts N sleeping threads and
// fills a map of 200000 entries, prints "ready", and whenever DIR/check appears
// writes DIR/jverdict: "ok" if every thread is alive and the map is intact.
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class Threads {
	public static void main(String[] args) throws Exception {
		int n = Integer.parseInt(args[0]);
		Path dir = Path.of(args[1]);
		List<Thread> threads = new ArrayList<>();
		Map<Integer, String> map = new HashMap<>();

		for (int i = 0; i < 200000; i++)
			map.put(i, "value:" + i);
		for (int i = 0; i < n; i++) {
			Thread t = new Thread(() -> {
				try {
					Thread.sleep(Long.MAX_VALUE);
				} catch (InterruptedException e) {
				}
			});
			t.setDaemon(true);
			t.start();
			threads.add(t);
		}
		System.out.println("ready");
		System.out.flush();
		for (;;) {
			Thread.sleep(50);
			Path check = dir.resolve("check");
			if (!Files.exists(check))
				continue;
			Files.delete(check);
			long alive = threads.stream().filter(Thread::isAlive).count();
			boolean mapOk = map.size() == 200000 && "value:4242".equals(map.get(4242))
					&& "value:199999".equals(map.get(199999));
			String v = alive == n && mapOk ? "ok\n"
					: "bad: " + alive + " threads alive, map " + (mapOk ? "ok" : "changed") + "\n";
			Files.writeString(dir.resolve("jverdict.tmp"), v);
			Files.move(dir.resolve("jverdict.tmp"), dir.resolve("jverdict"));
		}
	}
}
