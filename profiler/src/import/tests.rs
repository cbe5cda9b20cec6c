use super::*;
use crate::hw::datasrc::*;
use std::io::Write;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn local_dram_load() -> u64 {
    mem_s(MEM_OP_LOAD, MEM_OP_SHIFT)
        | mem_s(MEM_LVL_LOC_RAM | MEM_LVL_HIT, MEM_LVL_SHIFT)
        | mem_s(MEM_LVLNUM_RAM, MEM_LVLNUM_SHIFT)
}

fn l1_store_hit() -> u64 {
    mem_s(MEM_OP_STORE, MEM_OP_SHIFT) | mem_s(MEM_LVL_L1 | MEM_LVL_HIT, MEM_LVL_SHIFT)
}

#[test]
fn time_parsing_is_exact() {
    assert_eq!(parse_seconds("13701.703410"), Some(13_701_703_410_000));
    assert_eq!(parse_seconds("13701.703410123"), Some(13_701_703_410_123));
    assert_eq!(parse_seconds("0.5"), Some(500_000_000));
    assert_eq!(parse_seconds("12"), Some(12_000_000_000));
    assert_eq!(
        parse_seconds("1.0000000001"),
        None,
        "more than ns precision"
    );
    assert_eq!(parse_seconds("1.2a"), None);
    assert_eq!(parse_seconds(".5"), None);
}

#[test]
fn perf_mem_output_with_task_events() {
    let text = format!(
        "# captured on: somewhere\n\
         \x20     perf-exec     0/0         0.000000: PERF_RECORD_COMM: perf-exec:9278/9278\n\
         \x20       stencil  9278/9278  13701.703367: PERF_RECORD_COMM exec: stencil:9278/9278\n\
         \x20       stencil  9278/9278  13701.716266: PERF_RECORD_FORK(9278:9281):(9278:9278)\n\
         \x20       stencil  9278/9278  13701.716300: PERF_RECORD_FORK(9278:9280):(9278:9278)\n\
         \x20       worker 2  9278/9281  13701.716400: PERF_RECORD_COMM: worker 2:9278/9281\n\
         \x20       stencil  9278/9280  13701.720001: cpu/mem-loads,ldlat=30/P:     7f034f943110   {:x} |OP LOAD|LVL Local RAM or RAM hit|SNP Hit|TLB L1 or L2 hit|LCK No|BLK  N/A\n\
         \x20       worker 2  9278/9281  13701.720002: cpu/mem-stores/P:     7f034f943118   {:x} |OP STORE|LVL L1 hit|SNP N/A|TLB L1 or L2 hit|LCK No|BLK  N/A\n\
         \x20       stencil  9278/9278  13701.720003: cpu/mem-loads,ldlat=30/P:     0   {:x} |OP LOAD|LVL Local RAM or RAM hit|SNP Hit|TLB N/A|LCK No|BLK  N/A\n\
         \x20       stencil  9278/9278  13701.720000: cpu/mem-loads,ldlat=30/P:     55ac690ab424   {:x} |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A\n\
         \x20       stencil  9278/9278  13701.720004: PERF_RECORD_EXIT(9278:9278):(9277:9277)\n",
        local_dram_load(),
        l1_store_hit(),
        local_dram_load(),
        mem_s(MEM_OP_LOAD, MEM_OP_SHIFT)
            | mem_s(MEM_LVL_L1 | MEM_LVL_HIT, MEM_LVL_SHIFT)
            | mem_s(MEM_LVLNUM_L1, MEM_LVLNUM_SHIFT)
    );
    let f = file(&text);
    let t = read_perf_script(f.path()).unwrap();
    assert_eq!(t.thread_order, ThreadOrder::ForkRecords);
    let tids: Vec<i32> = t.threads.iter().map(|t| t.tid).collect();
    // Main first (parent of the first fork), then threads in fork order — not tid order.
    assert_eq!(tids, vec![9278, 9281, 9280]);
    assert_eq!(t.threads[0].name, "stencil");
    assert_eq!(t.threads[1].name, "worker 2");
    assert_eq!(t.samples.len(), 3);
    assert_eq!(t.skipped_no_addr, 1);
    // Sorted by time: the 720000 line comes first.
    assert_eq!(t.samples[0].time_ns, 13_701_720_000_000);
    assert_eq!(t.samples[0].addr, 0x55ac690ab424);
    assert_eq!(t.samples[0].dram, Some(false));
    let s = t.samples[1];
    assert_eq!(
        (s.tid, s.addr, s.kind, s.dram),
        (9280, 0x7f034f943110, AccessKind::Load, Some(true))
    );
    let s = t.samples[2];
    assert_eq!(
        (s.tid, s.kind, s.dram),
        (9281, AccessKind::Store, Some(false))
    );
}

#[test]
fn real_perf_script_page_fault_output_without_pid() {
    // As printed by perf 6.1 here: `perf script -F tid,time,addr,event` of a page-faults
    // recording with -d.
    let text = " 9278 13701.703410: page-faults:     55ac690ab424\n\
                \x20 9279 13701.703441: page-faults:     7f034f943110\n\
                \x20 9278 13701.703455: page-faults:     7fffcc277e49\n";
    let f = file(text);
    let t = read_perf_script(f.path()).unwrap();
    assert_eq!(t.thread_order, ThreadOrder::FirstAppearance);
    assert_eq!(
        t.threads.iter().map(|t| t.tid).collect::<Vec<_>>(),
        vec![9278, 9279]
    );
    assert_eq!(t.samples.len(), 3);
    assert_eq!(t.samples[2].addr, 0x7fffcc277e49);
    assert_eq!(t.samples[0].kind, AccessKind::Unknown);
    assert_eq!(t.samples[0].dram, None);
}

#[test]
fn data_src_na_and_cpu_column() {
    // perf's rendering of a data_src of a software event (all N/A), with a [cpu] column.
    let text = "python3  9278/9278 [001] 13701.703410: page-faults:     55ac690ab424      1e05080021 |OP N/A|LVL N/A or N/A|SNP N/A|TLB N/A|LCK N/A|BLK  N/A\n";
    let f = file(text);
    let t = read_perf_script(f.path()).unwrap();
    assert_eq!(t.samples[0].tid, 9278);
    assert_eq!(t.samples[0].kind, AccessKind::Unknown);
    assert_eq!(t.samples[0].dram, None);
}

#[test]
fn decoded_text_alone_classifies() {
    assert_eq!(
        classify_text("|OP LOAD|LVL Local RAM hit|SNP None|"),
        (AccessKind::Load, Some(true))
    );
    assert_eq!(
        classify_text("|OP LOAD|LVL Remote RAM (1 hop) hit|"),
        (AccessKind::Load, Some(true))
    );
    assert_eq!(
        classify_text("|OP STORE|LVL L1 hit|"),
        (AccessKind::Store, Some(false))
    );
    assert_eq!(
        classify_text("|OP STORE|LVL L1 miss|"),
        (AccessKind::Store, None)
    );
    assert_eq!(
        classify_text("|OP LOAD|LVL L3 miss|"),
        (AccessKind::Load, None)
    );
    assert_eq!(
        classify_text("|OP LOAD|LVL Remote Cache (1 hop) hit|"),
        (AccessKind::Load, Some(false))
    );
    assert_eq!(
        classify_text("|OP N/A|LVL N/A|"),
        (AccessKind::Unknown, None)
    );
    // A line with text but no hex value uses the text.
    let f = file("7 1.000001: mem-loads: 1000 |OP LOAD|LVL Local RAM hit|\n");
    let t = read_perf_script(f.path()).unwrap();
    assert_eq!(
        (t.samples[0].kind, t.samples[0].dram),
        (AccessKind::Load, Some(true))
    );
    // No data source at all: kind from the event name.
    let f = file("7 1.000001: cpu/mem-stores/P: 1000\n");
    let t = read_perf_script(f.path()).unwrap();
    assert_eq!(t.samples[0].kind, AccessKind::Store);
}

#[test]
fn perf_script_errors_name_the_line() {
    let f = file("7 1.000001: mem-loads: 1000\nthis is not perf output\n");
    let e = read_perf_script(f.path()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{}:2: no timestamp", f.path().display())),
        "{msg}"
    );

    let f = file("7 1.000001: mem-loads: 0xzz12\n");
    let e = read_perf_script(f.path()).unwrap_err().to_string();
    assert!(
        e.contains(":1: '0xzz12' after the event is not a hex data address"),
        "{e}"
    );

    let f = file("abc 1.000001: mem-loads: 1000\n");
    let e = read_perf_script(f.path()).unwrap_err().to_string();
    assert!(
        e.contains(":1: 'abc' before the timestamp is not a thread id"),
        "{e}"
    );

    let f = file("1.000001: mem-loads: 1000\n");
    let e = read_perf_script(f.path()).unwrap_err().to_string();
    assert!(e.contains(":1: no thread id before the timestamp"), "{e}");
}

#[test]
fn files_without_usable_samples_are_refused() {
    let f = file(" 7 1.000001: cycles:\n 7 1.000002: cycles:\n");
    let e = read_perf_script(f.path()).unwrap_err().to_string();
    assert!(
        e.contains("no usable samples: 2 sample lines have no data address"),
        "{e}"
    );
    let f = file("# only comments\n\n");
    let e = read_perf_script(f.path()).unwrap_err().to_string();
    assert!(e.ends_with(": no samples found"), "{e}");
    let e = read_perf_script(Path::new("/nonexistent/trace.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/nonexistent/trace.txt: "), "{e}");
}

#[test]
fn csv_import() {
    let f = file(
        "tid,time_ns,addr,kind,dram\n\
         # a comment\n\
         20,300,0x1040,store,\n\
         10,100,4096,load,true\n\
         30,200,0x2000,unknown,false\n\
         10,400,0x1000,load\n",
    );
    let t = read_csv(f.path()).unwrap();
    assert_eq!(t.thread_order, ThreadOrder::FirstAppearance);
    assert_eq!(
        t.threads.iter().map(|t| t.tid).collect::<Vec<_>>(),
        vec![20, 10, 30]
    );
    let times: Vec<u64> = t.samples.iter().map(|s| s.time_ns).collect();
    assert_eq!(times, vec![100, 200, 300, 400]);
    assert_eq!(t.samples[0].addr, 4096);
    assert_eq!(t.samples[0].dram, Some(true));
    assert_eq!(t.samples[1].dram, Some(false));
    assert_eq!(
        (t.samples[2].kind, t.samples[2].dram),
        (AccessKind::Store, None)
    );
    assert_eq!(t.samples[3].dram, None);
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_field() {
    // Without the header (first line is data) the BOM would sit before the tid.
    let f = file("\u{feff}10,100,0x1000,load\n20,200,0x1000,store\n");
    let t = read_csv(f.path()).unwrap();
    assert_eq!(t.threads[0].tid, 10);
}

#[test]
fn csv_errors_name_line_and_column() {
    let cases = [
        (
            "1,2,3\n",
            ":1: expected 4 or 5 columns (tid,time_ns,addr,kind[,dram]), found 3",
        ),
        ("x,2,3,load\n", ":1: column 1 (tid): 'x' is not a thread id"),
        (
            "1,2,3,load\n1,-5,3,load\n",
            ":2: column 2 (time_ns): '-5' is not a non-negative integer",
        ),
        (
            "1,2,0xgg,load\n",
            ":1: column 3 (addr): '0xgg' is not an address",
        ),
        (
            "1,2,3,fetch\n",
            ":1: column 4 (kind): 'fetch' is not load, store or unknown",
        ),
        (
            "1,2,3,load,maybe\n",
            ":1: column 5 (dram): 'maybe' is not true, false or empty",
        ),
    ];
    for (text, want) in cases {
        let f = file(text);
        let e = read_csv(f.path()).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
        assert!(e.starts_with(&f.path().display().to_string()), "{e}");
    }
}

#[test]
fn imported_ring_trace_analyses_to_neighbours() {
    // A 4-thread ring written as perf script text: thread i and i+1 alternate on buffer i.
    let mut text = String::new();
    let tids = [500, 501, 502, 503];
    let mut t_us = 0u64;
    for round in 0..400u64 {
        for (i, &tid) in tids.iter().enumerate() {
            let buf = if round % 2 == 0 { i } else { (i + 3) % 4 };
            let addr = 0x10_0000 * (buf as u64 + 1) + (round / 2 % 16) * 64;
            text.push_str(&format!(
                "app {}/{} {}.{:06}: cpu/mem-loads/P: {:x}\n",
                500,
                tid,
                t_us / 1_000_000,
                t_us % 1_000_000,
                addr
            ));
            t_us += 1;
        }
    }
    let f = file(&text);
    let trace = read_perf_script(f.path()).unwrap();
    let params = crate::analysis::AnalysisParams {
        expiration: crate::analysis::Expiration::Fixed { ns: 20_000 },
        ..Default::default()
    };
    let p = crate::analysis::analyze(&trace.samples, &trace.threads, &params).unwrap();
    for i in 0..4 {
        let row = p.comm.row(i);
        let best = (0..4)
            .filter(|&j| j != i)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        assert!(best == (i + 1) % 4 || best == (i + 3) % 4, "{i}: {row:?}");
        assert_eq!(row[(i + 2) % 4], 0.0);
    }
    assert_eq!(p.meta.threads[0].name, "app");
}

#[test]
fn profile_trace_records_where_the_profile_came_from() {
    let f = file("tid,time_ns,addr,kind,dram\n1,0,0x40,load,true\n2,10,0x48,store,\n");
    let p = profile_trace(ImportFormat::Csv, f.path(), &Default::default()).unwrap();
    assert_eq!(p.meta.backend, "import:csv");
    assert_eq!(p.meta.command, vec![f.path().display().to_string()]);
    assert_eq!(p.meta.params["import.thread_order"], "first appearance");
    assert_eq!(p.meta.samples, 2);
    assert!(p.meta.load_dram_only);
    assert_eq!(p.comm.get(0, 1), 1.0);
    assert_eq!(
        ImportFormat::parse("perf-script"),
        Some(ImportFormat::PerfScript)
    );
    assert_eq!(ImportFormat::parse("pebs"), None);
}
