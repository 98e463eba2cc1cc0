package sharedsub.jvm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}) that sets permissions through java.nio instead of a
 * {@code chmod} child process.
 *
 * <p>Without Hadoop's native library (pyspark does not ship it) {@link RawLocalFileSystem} runs
 * {@code chmod} for every file it creates. The fan-out's Spark checkpoint creates four files per
 * micro-batch (an offset file, a commit file and their checksums): four child processes of the
 * driver JVM, each with a thread reading its output, per micro-batch (bench/RESULTS.md, issue 31).
 *
 * <p>Contract: the same files, contents and permission bits as {@link LocalFileSystem}. Modes with
 * bits beyond {@code rwxrwxrwx} (sticky, setuid), and file systems without POSIX attributes, are
 * left to Hadoop's own way. jobs/session.py installs it as {@code fs.file.impl} for local masters.
 */
public class NoForkLocalFileSystem extends LocalFileSystem {
    public NoForkLocalFileSystem() {
        super(new Raw());
    }

    /** The raw (checksum-less) file system underneath, with the java.nio permission setter. */
    public static class Raw extends RawLocalFileSystem {
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            int mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission);
                return;
            }
            Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
            for (int bit = 0; bit < BITS.length; bit++) {
                if ((mode & (1 << bit)) != 0) {
                    set.add(BITS[bit]);
                }
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
            } catch (UnsupportedOperationException e) {
                super.setPermission(p, permission);
            }
        }
    }
}
